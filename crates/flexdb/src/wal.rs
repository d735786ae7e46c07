//! The write-ahead log: numbered, checksummed records with group commit.
//!
//! File format (docs/FORMAT.md): a 32-byte header (`FLEXWAL1`, format
//! version, zero, then a *durable-length slot*: a file length known durable,
//! with its CRC) then records
//! `crc32c u32 | len u32 | seq u64 | synced u64 | payload`, the CRC covering
//! everything after it. `synced` is the file offset up to which the log was
//! durable when the record was appended. One file per MemTable generation;
//! the store retires a file once its MemTable is durable in the space.
//!
//! Replay stops at the first record that does not verify: a crash may leave
//! any mixture of the writes after the last sync (devices reorder them), so
//! a damaged record followed by intact ones is normal there. It is
//! corruption when an intact later record says the damaged bytes had
//! already been synced, or when the file is shorter than its durable-length
//! slot says (truncation); then replay fails instead of silently dropping
//! durable writes. Each sync also rewrites the slot with the length the
//! *previous* sync made durable (the same fsync covers it, and that length
//! is durable whatever order the device writes in), so only damage within
//! the last synced stretch can pass for a crash's torn tail.
//!
//! Invariants:
//! - Records are appended in increasing sequence order (a batch's record
//!   carries the number of its first operation), to an in-memory buffer first;
//!   the buffer goes to the file in order (when it passes `FLUSH_BYTES`, on
//!   `flush` and on `sync_to`), so the file always holds a prefix of the
//!   appended records and replay returns a prefix.
//! - `sync_to(end)` returns only after every record ending at or before
//!   `end` is durable. Concurrent callers share fsyncs: whoever holds the
//!   I/O lock writes everything buffered so far and syncs once for all
//!   (group commit); the others find their records durable and return.
//! - After an I/O error the log refuses further appends (its tail is
//!   unknown); reopening the store recovers the durable prefix.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use flexspace::StorageFile;
use parking_lot::Mutex;

use crate::error::{Error, Result};

const MAGIC: &[u8; 8] = b"FLEXWAL1";
const FORMAT_VERSION: u32 = 1;
/// Bytes of the file header.
pub const HEADER_LEN: u64 = 32;
/// Where the durable-length slot lies in the header.
const SLOT_AT: u64 = 16;
const RECORD_HEAD: usize = 24;
/// Buffered bytes that make an append hand the buffer to the file.
const FLUSH_BYTES: usize = 64 << 10;
/// The largest payload of one record.
pub const MAX_RECORD: usize = (1 << 31) - 1;

/// One replayed record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// Its sequence number.
    pub seq: u64,
    /// Its payload.
    pub payload: Vec<u8>,
}

struct Buffer {
    /// Encoded records not yet handed to the file.
    bytes: Vec<u8>,
    /// File offset where `bytes` starts.
    start: u64,
    /// A write to the file failed: the log refuses everything.
    failed: Option<String>,
}

/// The mapped append path and its own handle for syncing (so appends go on
/// during an fsync).
struct Mapped {
    log: Mutex<crate::wal_map::MappedLog>,
    sync_file: std::fs::File,
}

/// A write-ahead log on one file.
///
/// Records reach the operating system either at once, through a shared
/// mapping of the preallocated file (`wal_map`: real files, the default), or
/// through an in-memory buffer written out in big chunks (any other storage
/// backend, such as the fault-injecting one of the tests).
pub struct Wal {
    file: Arc<dyn StorageFile>,
    mapped: Option<Mapped>,
    name: String,
    buf: Mutex<Buffer>,
    /// Serializes writes and syncs of the file.
    io: Mutex<()>,
    /// File offset up to which records are durable.
    synced: AtomicU64,
    /// Bytes written to the file so far.
    written_bytes: AtomicU64,
    /// The length the durable-length slot holds (I/O lock).
    slot: AtomicU64,
}

/// The durable-length slot for `len`: the length and its CRC.
fn slot(len: u64) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&len.to_le_bytes());
    let crc = crc32c::crc32c(&b[..8]);
    b[8..12].copy_from_slice(&crc.to_le_bytes());
    b
}

/// The length in a durable-length slot, 0 when it does not verify.
fn parse_slot(b: &[u8]) -> u64 {
    if b.len() < 12 || u32_at(b, 8) != crc32c::crc32c(&b[..8]) {
        return 0;
    }
    u64_at(b, 0)
}

fn encode_record(out: &mut Vec<u8>, seq: u64, synced: u64, payload: &[u8]) {
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&seq.to_le_bytes());
    out.extend_from_slice(&synced.to_le_bytes());
    out.extend_from_slice(payload);
    let crc = crc32c::crc32c(&out[start + 4..]);
    out[start..start + 4].copy_from_slice(&crc.to_le_bytes());
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

/// The valid record starting at `pos` whose sequence number is above
/// `after` (any, when `None`), and its `synced` field.
fn record_at(bytes: &[u8], pos: usize, after: Option<u64>) -> Option<(Record, u64)> {
    let h = bytes.get(pos..pos + RECORD_HEAD)?;
    let rseq = u64_at(h, 8);
    if after.is_some_and(|a| rseq <= a) {
        return None;
    }
    let plen = u32_at(h, 4) as usize;
    if plen > MAX_RECORD {
        return None;
    }
    let end = pos.checked_add(RECORD_HEAD + plen)?;
    let body = bytes.get(pos + 4..end)?;
    if crc32c::crc32c(body) != u32_at(h, 0) {
        return None;
    }
    Some((
        Record {
            seq: rseq,
            payload: bytes[pos + RECORD_HEAD..end].to_vec(),
        },
        u64_at(h, 16),
    ))
}

impl Wal {
    /// Starts a new, empty log in `file` (truncated first, header synced).
    /// `name` names the file in errors. With `real`, the path of the same
    /// file on a real file system, records are appended through a mapping
    /// with room for `capacity` bytes to begin with (buffered writes when the
    /// file cannot be preallocated and mapped).
    pub fn create(
        file: Arc<dyn StorageFile>,
        name: &str,
        real: Option<(&std::path::Path, u64)>,
    ) -> Result<Wal> {
        let mut header = Vec::with_capacity(HEADER_LEN as usize);
        header.extend_from_slice(MAGIC);
        header.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        header.extend_from_slice(&[0; 4]);
        header.extend_from_slice(&slot(HEADER_LEN));
        let io = |e| io_err(name, e);
        file.set_len(0).map_err(io)?;
        file.write_all_at(0, &header).map_err(io)?;
        file.sync().map_err(io)?;
        let mapped = real.and_then(|(path, capacity)| {
            let log = crate::wal_map::MappedLog::open(path, HEADER_LEN, capacity).ok()?;
            let sync_file = std::fs::OpenOptions::new().write(true).open(path).ok()?;
            Some(Mapped {
                log: Mutex::new(log),
                sync_file,
            })
        });
        Ok(Wal {
            file,
            mapped,
            name: name.to_string(),
            buf: Mutex::new(Buffer {
                bytes: Vec::new(),
                start: HEADER_LEN,
                failed: None,
            }),
            io: Mutex::new(()),
            synced: AtomicU64::new(HEADER_LEN),
            written_bytes: AtomicU64::new(HEADER_LEN),
            slot: AtomicU64::new(HEADER_LEN),
        })
    }

    /// A handle on an existing, durable log of `len` bytes that takes no
    /// more records (recovery hands replayed logs to the committer, which
    /// only syncs them).
    pub fn detached(file: Arc<dyn StorageFile>, name: &str, len: u64) -> Wal {
        Wal {
            file,
            mapped: None,
            name: name.to_string(),
            buf: Mutex::new(Buffer {
                bytes: Vec::new(),
                start: len,
                failed: None,
            }),
            io: Mutex::new(()),
            synced: AtomicU64::new(len),
            written_bytes: AtomicU64::new(0),
            slot: AtomicU64::new(len),
        }
    }

    /// Reads the valid records of an existing log, in order: everything up
    /// to the first torn or corrupt record (a crash's torn tail). A corrupt
    /// record followed by a valid record with the next sequence number is
    /// corruption, not a torn tail, and is an error.
    pub fn read(file: &dyn StorageFile, name: &str) -> Result<Vec<Record>> {
        let corrupt = |detail: &str| Error::Corrupt {
            file: name.into(),
            detail: detail.to_string(),
        };
        let len = file.len().map_err(|e| io_err(name, e))?;
        let mut bytes = vec![0u8; len as usize];
        file.read_exact_at(0, &mut bytes)
            .map_err(|e| io_err(name, e))?;
        let header_ok = len >= HEADER_LEN
            && &bytes[..8] == MAGIC
            && bytes[8..12] == FORMAT_VERSION.to_le_bytes();
        if !header_ok {
            // A log is created by writing and syncing its header before any
            // record: a crash during creation leaves at most a torn header.
            if len <= HEADER_LEN {
                return Ok(Vec::new());
            }
            return Err(corrupt(if &bytes[..8] == MAGIC {
                "unknown log format version"
            } else {
                "not a FlexDB write-ahead log"
            }));
        }
        let durable = parse_slot(&bytes[SLOT_AT as usize..HEADER_LEN as usize]);
        if len < durable {
            return Err(corrupt(&format!(
                "truncated to {len} bytes, below the {durable} bytes it had synced"
            )));
        }
        let mut records: Vec<Record> = Vec::new();
        let mut pos = HEADER_LEN as usize;
        while let Some((r, _)) = record_at(&bytes, pos, records.last().map(|r| r.seq)) {
            pos += RECORD_HEAD + r.payload.len();
            records.push(r);
        }
        if (pos as u64) < durable {
            return Err(corrupt(&format!(
                "the record at byte {pos} is damaged, below the {durable} bytes the log had synced"
            )));
        }
        if pos < bytes.len() {
            // A record's operations take consecutive sequence numbers and
            // each takes at least one payload byte, so a record that starts
            // `d` bytes further has a number at most `d + 1` above the last
            // good one: that bound keeps the scan cheap (a random sequence
            // number almost never qualifies, and no checksum is computed for
            // it).
            let after = records.last().map(|r| r.seq);
            let damaged_durable = (pos + 1..bytes.len()).any(|p| {
                let Some(h) = bytes.get(p..p + RECORD_HEAD) else {
                    return false;
                };
                let seq = u64_at(h, 8);
                let plausible = match after {
                    Some(a) => seq > a && seq - a <= (p - pos) as u64 + 1,
                    None => true,
                };
                plausible && u64_at(h, 16) > pos as u64 && record_at(&bytes, p, after).is_some()
            });
            if damaged_durable {
                return Err(corrupt(&format!(
                    "the record at byte {pos} is damaged, but a later record shows it was synced"
                )));
            }
        }
        Ok(records)
    }

    /// Appends one record (buffered) and returns the file offset where it
    /// ends, for [`Wal::sync_to`].
    pub fn append(&self, seq: u64, payload: &[u8]) -> Result<u64> {
        if payload.len() > MAX_RECORD {
            return Err(Error::BatchTooLarge {
                len: payload.len(),
                max: MAX_RECORD,
            });
        }
        let mut b = self.buf.lock();
        if let Some(why) = &b.failed {
            return Err(self.stopped(why));
        }
        let synced = self.synced.load(Ordering::Acquire);
        if let Some(m) = &self.mapped {
            // Encode into the (idle) buffer, then copy into the mapping.
            b.bytes.clear();
            encode_record(&mut b.bytes, seq, synced, payload);
            let mut log = m.log.lock();
            if let Err(e) = log.append(&b.bytes) {
                b.failed = Some(format!("append failed: {e}"));
                return Err(io_err(&self.name, e));
            }
            self.written_bytes
                .fetch_add(b.bytes.len() as u64, Ordering::Relaxed);
            return Ok(log.end());
        }
        encode_record(&mut b.bytes, seq, synced, payload);
        let end = b.start + b.bytes.len() as u64;
        if b.bytes.len() >= FLUSH_BYTES {
            // Hand the buffer to the file unless a sync is doing so already.
            if let Some(_io) = self.io.try_lock() {
                self.write_out(b)?;
            }
        }
        Ok(end)
    }

    /// Writes the buffer to the file (not synced; mapped logs have none).
    pub fn flush(&self) -> Result<()> {
        if self.mapped.is_some() {
            return Ok(());
        }
        let _io = self.io.lock();
        self.write_out(self.buf.lock())
    }

    /// Makes every record ending at or before `end` durable.
    pub fn sync_to(&self, end: u64) -> Result<()> {
        if self.synced.load(Ordering::Acquire) >= end {
            return Ok(());
        }
        let _io = self.io.lock();
        if self.synced.load(Ordering::Acquire) >= end {
            return Ok(());
        }
        if let Some(m) = &self.mapped {
            return self.sync_mapped(m);
        }
        let b = self.buf.lock();
        let stop = b.start + b.bytes.len() as u64;
        self.write_out(b)?;
        // Record what the previous sync made durable; this fsync carries it.
        let prev = self.synced.load(Ordering::Acquire);
        if prev > self.slot.load(Ordering::Relaxed) {
            if let Err(e) = self.file.write_all_at(SLOT_AT, &slot(prev)) {
                self.buf.lock().failed = Some(format!("write failed: {e}"));
                return Err(io_err(&self.name, e));
            }
            self.slot.store(prev, Ordering::Relaxed);
        }
        if let Err(e) = self.file.sync() {
            let why = format!("sync failed: {e}");
            self.buf.lock().failed = Some(why);
            return Err(io_err(&self.name, e));
        }
        self.synced.store(stop, Ordering::Release);
        Ok(())
    }

    /// The mapped log's sync; the caller holds the I/O lock.
    fn sync_mapped(&self, m: &Mapped) -> Result<()> {
        if let Some(why) = &self.buf.lock().failed {
            return Err(self.stopped(why));
        }
        let stop = {
            let mut log = m.log.lock();
            let prev = self.synced.load(Ordering::Acquire);
            if prev > self.slot.load(Ordering::Relaxed) {
                log.write_at(SLOT_AT, &slot(prev));
                self.slot.store(prev, Ordering::Relaxed);
            }
            log.end()
        };
        if let Err(e) = m.sync_file.sync_data() {
            self.buf.lock().failed = Some(format!("sync failed: {e}"));
            return Err(io_err(&self.name, e));
        }
        self.synced.store(stop, Ordering::Release);
        Ok(())
    }

    /// Makes every appended record durable.
    pub fn sync(&self) -> Result<()> {
        let end = self.end();
        self.sync_to(end)
    }

    /// The file offset after the last appended record.
    pub fn end(&self) -> u64 {
        if let Some(m) = &self.mapped {
            return m.log.lock().end();
        }
        let b = self.buf.lock();
        b.start + b.bytes.len() as u64
    }

    /// Bytes written to the file so far (header included).
    pub fn written_bytes(&self) -> u64 {
        self.written_bytes.load(Ordering::Relaxed)
    }

    /// Writes the buffered records; the caller holds the I/O lock.
    fn write_out(&self, mut b: parking_lot::MutexGuard<'_, Buffer>) -> Result<()> {
        if let Some(why) = &b.failed {
            return Err(self.stopped(why));
        }
        if b.bytes.is_empty() {
            return Ok(());
        }
        let data = std::mem::take(&mut b.bytes);
        let start = b.start;
        b.start += data.len() as u64;
        // Appends may continue into a new buffer while this one is written.
        drop(b);
        if let Err(e) = self.file.write_all_at(start, &data) {
            self.buf.lock().failed = Some(format!("write failed: {e}"));
            return Err(io_err(&self.name, e));
        }
        self.written_bytes
            .fetch_add(data.len() as u64, Ordering::Relaxed);
        let mut b = self.buf.lock();
        if b.bytes.is_empty() && b.bytes.capacity() < data.capacity() {
            let mut data = data;
            data.clear();
            b.bytes = data;
        }
        Ok(())
    }

    fn stopped(&self, why: &str) -> Error {
        Error::Stopped(format!("write-ahead log {}: {why}", self.name))
    }
}

fn io_err(name: &str, source: std::io::Error) -> Error {
    Error::Io {
        file: name.into(),
        source,
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
        let wal = Wal::create(f.clone(), "wal", None).unwrap();
        // Sequence numbers jump by a batch's size from record to record.
        for i in 0..100u32 {
            let end = wal.append(10 + 3 * u64::from(i), &i.to_le_bytes()).unwrap();
            if i % 7 == 0 {
                wal.sync_to(end).unwrap();
            }
        }
        wal.sync().unwrap();
        let recs = Wal::read(f.as_ref(), "wal").unwrap();
        assert_eq!(recs.len(), 100);
        for (i, r) in recs.iter().enumerate() {
            assert_eq!(r.seq, 10 + 3 * i as u64);
            assert_eq!(r.payload, (i as u32).to_le_bytes());
        }
    }

    #[test]
    fn unsynced_records_stay_buffered_until_flushed() {
        let f = mem();
        let wal = Wal::create(f.clone(), "wal", None).unwrap();
        wal.append(1, b"small").unwrap();
        assert_eq!(f.len().unwrap(), HEADER_LEN);
        wal.flush().unwrap();
        assert_eq!(Wal::read(f.as_ref(), "wal").unwrap().len(), 1);
        // A big enough buffer goes to the file on its own.
        for i in 0..100u64 {
            wal.append(2 + i, &[7u8; 1024]).unwrap();
        }
        assert!(f.len().unwrap() > HEADER_LEN + 64 * 1024);
    }

    #[test]
    fn torn_tail_ends_replay() {
        let f = mem();
        let wal = Wal::create(f.clone(), "wal", None).unwrap();
        for i in 0..10u8 {
            wal.append(u64::from(i), &[i; 20]).unwrap();
        }
        wal.sync().unwrap();
        let len = f.len().unwrap();
        for cut in [len - 1, len - 20, len - 36, HEADER_LEN + 5, HEADER_LEN, 3] {
            let mut b = vec![0; cut as usize];
            f.read_exact_at(0, &mut b).unwrap();
            let recs = Wal::read(&MemFile::from_bytes(b), "wal").unwrap();
            assert!(recs.len() < 10);
            for (i, r) in recs.iter().enumerate() {
                assert_eq!(r.payload, [i as u8; 20]);
            }
        }
    }

    /// A log of records 0..5, synced, then records 5..7 (not synced).
    fn two_batches() -> Arc<dyn StorageFile> {
        let f = mem();
        let wal = Wal::create(f.clone(), "wal", None).unwrap();
        for i in 0..5u8 {
            wal.append(u64::from(i), &[i; 8]).unwrap();
        }
        wal.sync().unwrap();
        for i in 5..7u8 {
            wal.append(u64::from(i), &[i; 8]).unwrap();
        }
        wal.flush().unwrap();
        f
    }

    fn flip(f: &Arc<dyn StorageFile>, at: u64) {
        let mut b = [0u8; 1];
        f.read_exact_at(at, &mut b).unwrap();
        f.write_all_at(at, &[b[0] ^ 1]).unwrap();
    }

    #[test]
    fn truncation_below_an_earlier_sync_is_corruption() {
        let f = two_batches();
        // Sync twice more so the slot holds the length after record 6.
        let wal = Wal {
            file: f.clone(),
            mapped: None,
            name: "wal".into(),
            buf: Mutex::new(Buffer {
                bytes: Vec::new(),
                start: f.len().unwrap(),
                failed: None,
            }),
            io: Mutex::new(()),
            synced: AtomicU64::new(HEADER_LEN + 5 * (RECORD_HEAD as u64 + 8)),
            written_bytes: AtomicU64::new(0),
            slot: AtomicU64::new(HEADER_LEN),
        };
        wal.append(7, b"x").unwrap();
        wal.sync().unwrap();
        let len = f.len().unwrap();
        let durable = HEADER_LEN + 5 * (RECORD_HEAD as u64 + 8);
        for cut in [durable - 1, HEADER_LEN + 3, durable - 20] {
            let mut b = vec![0; cut as usize];
            f.read_exact_at(0, &mut b).unwrap();
            assert!(
                matches!(
                    Wal::read(&MemFile::from_bytes(b), "wal"),
                    Err(Error::Corrupt { .. })
                ),
                "cut at {cut}"
            );
        }
        // Within the last synced stretch a cut passes for a torn tail.
        let mut b = vec![0; (len - 3) as usize];
        f.read_exact_at(0, &mut b).unwrap();
        assert_eq!(Wal::read(&MemFile::from_bytes(b), "wal").unwrap().len(), 7);
    }

    #[test]
    fn damage_to_synced_records_is_corruption_and_to_the_tail_is_a_tear() {
        let record = RECORD_HEAD as u64 + 8;
        // A payload byte of record 2: a later record was appended after the
        // sync that covered it.
        let f = two_batches();
        flip(&f, HEADER_LEN + 2 * record + RECORD_HEAD as u64);
        assert!(matches!(
            Wal::read(f.as_ref(), "wal"),
            Err(Error::Corrupt { .. })
        ));
        // Record 5 was never synced: damage there (or a device that wrote
        // record 6 but not 5) is a torn tail.
        let f = two_batches();
        flip(&f, HEADER_LEN + 5 * record + RECORD_HEAD as u64);
        assert_eq!(Wal::read(f.as_ref(), "wal").unwrap().len(), 5);
        // The last record of the synced batch, with nothing after that
        // sync to vouch for it, cannot be told from a tear.
        let g = mem();
        let wal = Wal::create(g.clone(), "wal", None).unwrap();
        for i in 0..5u8 {
            wal.append(u64::from(i), &[i; 8]).unwrap();
        }
        wal.sync().unwrap();
        let last = g.len().unwrap() - 1;
        flip(&g, last);
        assert_eq!(Wal::read(g.as_ref(), "wal").unwrap().len(), 4);
    }

    #[test]
    fn not_a_log_is_corruption() {
        let f = MemFile::from_bytes(b"hello world, this is not a write-ahead log at all".to_vec());
        assert!(matches!(Wal::read(&f, "x"), Err(Error::Corrupt { .. })));
        // A torn header (a crash while the log was created) holds nothing.
        let f = MemFile::from_bytes(vec![1, 2]);
        assert!(Wal::read(&f, "x").unwrap().is_empty());
        let f = MemFile::from_bytes(b"FLEXWAL".to_vec());
        assert!(Wal::read(&f, "x").unwrap().is_empty());
    }

    #[test]
    fn concurrent_syncers_share_the_log() {
        let file = Arc::new(MemFile::new());
        let f: Arc<dyn StorageFile> = file.clone();
        let wal = Arc::new(Wal::create(f.clone(), "wal", None).unwrap());
        let next = Arc::new(Mutex::new(0u64));
        let threads: Vec<_> = (0..4u8)
            .map(|t| {
                let wal = wal.clone();
                let next = next.clone();
                let file = file.clone();
                std::thread::spawn(move || {
                    for i in 0..200u32 {
                        let mut payload = vec![t];
                        payload.extend_from_slice(&i.to_le_bytes());
                        // Sequence numbers are handed out in append order.
                        let (seq, end) = {
                            let mut n = next.lock();
                            let seq = *n;
                            let end = wal.append(seq, &payload).unwrap();
                            *n += 1;
                            (seq, end)
                        };
                        if i % 3 == 0 {
                            wal.sync_to(end).unwrap();
                            // Durable means: in the file, with everything
                            // before (read from one snapshot of the file).
                            let snapshot = MemFile::from_bytes(file.to_bytes());
                            let recs = Wal::read(&snapshot, "wal").unwrap();
                            assert!(recs.len() as u64 > seq);
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        wal.sync().unwrap();
        let recs = Wal::read(f.as_ref(), "wal").unwrap();
        assert_eq!(recs.len(), 800);
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
