//! The write-ahead log: numbered, checksummed records with group commit.
//!
//! File format (docs/FORMAT.md): a 48-byte header (`FLEXWAL1`, format
//! version 4, zero, a *durable-length slot*: a file length known durable,
//! with its CRC, then the lowest sequence number any record of the log
//! carries and how many generations back the log it follows is, with their
//! CRC), then records (`record3`): `crc32c u32 |
//! varint(len << 2 | kind) | body`, the CRC covering everything after it
//! and seeded with the header's first sequence number. A batch's body is
//! its sequence number's distance from the expected one (a varint, one
//! byte for a run of single writes) and its payload: 7 bytes of head for
//! most records (24 in version 2, which replay still reads, as version
//! 1). A *sync mark* before the first record after each sync says the
//! offset the log was durable up to; a *chain record*, first in a log made
//! at rotation, names the log before it and the offset its records end at
//! ([`Wal::link`]). One file per MemTable generation; the store retires a
//! file once its MemTable is durable in the space. A file is created
//! under a temporary name and renamed once its header is durable
//! (`log_files::new_wal`), so a named log with a torn or foreign header
//! is damage, reported like any other.
//!
//! Logs chained: a rotation does not sync the old log under the writer
//! lock. The new log's chain record names the old log's end, a sync of
//! the new log syncs the old one first ([`Wal::sync_to`]), and the old
//! log is synced on a thread; recovery takes a chained log's records only
//! after the log it names replayed whole to that end (or is committed).
//! So replay still yields a prefix of the writes, and every acknowledged
//! sync holds every write before it.
//!
//! A log may take over the file of a committed one (`Wal::reuse`), whose
//! records stay past the new ones: all of them are numbered below the new
//! log's first sequence number, so replay and its damage check never take
//! one for the new log's (in version 3 their CRC is seeded with another
//! first number; version 2 accepts only records numbered above the last
//! one taken, above the first number less one to begin with).
//!
//! Replay stops at the first record that does not verify: a crash may leave
//! any mixture of the writes after the last sync (devices reorder them), so
//! a damaged record followed by intact ones is normal there. It is
//! corruption when an intact later record (in version 3, a sync mark) says
//! the damaged bytes had already been synced, or when the file is shorter than its durable-length
//! slot says (truncation); then replay fails instead of silently dropping
//! durable writes. Each sync also rewrites the slot with the length the
//! *previous* sync made durable (the same fsync covers it, and that length
//! is durable whatever order the device writes in), so only damage within
//! the last synced stretch can pass for a crash's torn tail.
//!
//! Replay reads the file in bounded chunks (`REPLAY_CHUNK`, or one
//! record's length when that is more) and hands each record's payload to
//! a callback borrowed from the read buffer, so memory stays bounded by
//! the chunk and the largest record, whatever the log's size. An all-zero
//! record head (the preallocated tail of a mapped log) ends the records,
//! and the search for an intact later record skips zero runs in blocks
//! (a vouching version-2 record has non-zero `synced` bytes, a mark a
//! non-zero length byte). Neither shortcut
//! changes a verdict: replay accepts and rejects exactly the files a
//! whole-file reading would (the tests keep that reading as a reference).
//!
//! Invariants:
//! - Records are appended in increasing sequence order (a batch's record
//!   carries the number of its first operation; version 3 refuses a lower
//!   one), to an in-memory buffer first;
//!   the buffer goes to the file in order (when it passes `FLUSH_BYTES`, on
//!   `flush` and on `sync_to`), so the file always holds a prefix of the
//!   appended records and replay returns a prefix.
//! - `sync_to(end)` returns only after every record ending at or before
//!   `end` is durable, and the logs before this one ([`Wal::link`]) whole. Concurrent callers share fsyncs: whoever holds the
//!   I/O lock writes everything buffered so far and syncs once for all
//!   (group commit); the others find their records durable and return.
//! - A mapped log grows ahead of its writers, on a thread the write path
//!   starts once less than half a growth step is left
//!   ([`Wal::claim_grow_ahead`], `grow_ahead`); an append that finds no
//!   room still grows the log itself.
//! - A mapped log asks the kernel to start writing each stretch of
//!   `writeback::WRITEBACK_BYTES` to the device as it fills
//!   ([`Wal::write_back`]): a hint that no durability rule relies on.
//! - After an I/O error the log refuses further appends (its tail is
//!   unknown); reopening the store recovers the durable prefix. A mapped
//!   log that cannot grow (a full disk) is the exception: the append that
//!   needed the room fails with the `Io` error (`ENOSPC`) and changes
//!   nothing, so every record before it can still be synced.
//! - Replay calls its callback for the valid prefix of records, in order,
//!   and only then reports corruption found after that prefix; a caller
//!   that gets an error must discard what it built.
//! - Every record of a log is numbered at or above its header's first
//!   sequence number, and every record of an older log left in its file
//!   below it: only a log whose every record this process appended gives
//!   its file to another ([`Wal::reusable`]).

pub(crate) mod footprint;
mod format;
mod grow_ahead;
pub(crate) mod log_files;
mod mapped;
pub(crate) mod next_log;
mod record3;
mod replay;
mod replay3;
pub(crate) mod spare_logs;
mod writeback;

use format::*;
pub use format::{HEADER_LEN, MAX_RECORD};
pub use replay::Replayed;
#[cfg(test)]
use replay::REPLAY_CHUNK;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use flexspace::{MappableFile, StorageFile};
use parking_lot::Mutex;

use crate::error::{Error, Result};

/// One replayed record (tests collect them; recovery uses `Wal::replay`).
#[cfg(test)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// Its sequence number.
    pub seq: u64,
    /// Its payload.
    pub payload: Vec<u8>,
}

/// What [`Wal::trim_tail`] leaves allocated past the records, the bytes it
/// punches under one hold of the append locks, and the alignment of its
/// bound (file-system blocks).
const TRIM_MARGIN: u64 = 4 << 20;
const TRIM_CHUNK: u64 = 4 << 20;
const TRIM_ALIGN: u64 = 4096;

struct Buffer {
    /// Encoded records not yet handed to the file.
    bytes: Vec<u8>,
    /// File offset where `bytes` starts.
    start: u64,
    /// The sequence number the next batch is expected to carry (version
    /// 3 encodes its distance from it).
    expected: u64,
    /// The durable offset the last sync mark announced (version 3).
    marked: u64,
    /// No record appended yet (a chain record may still be).
    fresh: bool,
    /// A write to the file failed: the log refuses everything.
    failed: Option<String>,
}

/// The mapped append path and its own handle for syncing (so appends go on
/// during an fsync).
struct Mapped {
    log: Mutex<mapped::MappedLog>,
    sync_file: Arc<dyn MappableFile>,
    ahead: grow_ahead::GrowAhead,
}

/// A write-ahead log on one file.
///
/// Records reach the operating system either at once, through a shared
/// mapping of the preallocated file (`mapped`: any backend that maps
/// files, real files and the crash tests' fault-injecting one), or through
/// an in-memory buffer written out in big chunks (backends that cannot map,
/// or a file that cannot be preallocated).
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
    /// Each sync also makes its own length durable in the slot (a second
    /// fsync): see [`Wal::set_strict_sync`].
    strict_sync: std::sync::atomic::AtomicBool,
    /// File offset up to which early write-back was requested (mapped
    /// logs; see `writeback`).
    written_back: AtomicU64,
    /// Every record in the file was appended by this object (see
    /// [`Wal::reusable`]).
    own: bool,
    /// The format version its records are written in (3; the tests also
    /// write version 2).
    version: u32,
    /// The header's first sequence number, and the CRC seed of version-3
    /// records (`record3::salt`).
    first: u64,
    salt: u32,
    /// The log before this one while it may not be durable yet (see
    /// [`Wal::link`]): a sync of this log syncs it first.
    prev: Mutex<Option<Arc<Wal>>>,
}

impl Wal {
    /// Starts a new, empty log in `file` (truncated first, header synced).
    /// `name` names the file in errors. With `mapping`, the same file
    /// opened for mapped appends, records are appended through a mapping
    /// with room for `capacity` bytes to begin with (buffered writes when the
    /// file cannot be preallocated and mapped). Every record appended must
    /// carry a sequence number of at least `first`. The log follows the log
    /// `back` generations before its own (0: none), which its header
    /// records durably.
    pub fn create(
        file: Arc<dyn StorageFile>,
        name: &str,
        mapping: Option<(Arc<dyn MappableFile>, u64)>,
        first: u64,
        back: u32,
    ) -> Result<Wal> {
        file.set_len(0).map_err(|e| io_err(name, e))?;
        Self::reuse_as(file, name, mapping, first, FORMAT_VERSION, back)
    }

    /// Starts a new, empty log in `file`, which holds a log that is no
    /// longer needed (committed): only the header is written (and synced),
    /// the old records stay where they are and are overwritten as records
    /// are appended. Their sequence numbers must all be below `first` (the
    /// lowest any record of the new log will carry): replay tells them
    /// from this log's records by that. The point is the file's pages,
    /// which are in memory already: appending into them costs no page
    /// allocation (docs/DESIGN.md, "Logs reused"). `back` as in
    /// [`Wal::create`].
    pub fn reuse(
        file: Arc<dyn StorageFile>,
        name: &str,
        mapping: Option<(Arc<dyn MappableFile>, u64)>,
        first: u64,
        back: u32,
    ) -> Result<Wal> {
        Self::reuse_as(file, name, mapping, first, FORMAT_VERSION, back)
    }

    /// [`Wal::reuse`] writing a header and records of format `version`
    /// (2 to 4; `back` only in 4).
    fn reuse_as(
        file: Arc<dyn StorageFile>,
        name: &str,
        mapping: Option<(Arc<dyn MappableFile>, u64)>,
        first: u64,
        version: u32,
        back: u32,
    ) -> Result<Wal> {
        let io = |e| io_err(name, e);
        file.write_all_at(0, &header_of_version(version, first, back))
            .map_err(io)?;
        file.sync().map_err(io)?;
        let mapped = mapping.and_then(|(file, capacity)| {
            let log = mapped::MappedLog::open(file, HEADER_LEN, capacity).ok()?;
            let sync_file = log.file().clone();
            Some(Mapped {
                ahead: grow_ahead::GrowAhead::new(&log, capacity),
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
                expected: first,
                marked: HEADER_LEN,
                fresh: true,
                failed: None,
            }),
            io: Mutex::new(()),
            synced: AtomicU64::new(HEADER_LEN),
            written_bytes: AtomicU64::new(HEADER_LEN),
            slot: AtomicU64::new(HEADER_LEN),
            strict_sync: std::sync::atomic::AtomicBool::new(false),
            written_back: AtomicU64::new(HEADER_LEN),
            own: true,
            version,
            first,
            salt: record3::salt(first),
            prev: Mutex::new(None),
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
                expected: u64::MAX,
                marked: len,
                fresh: false,
                failed: None,
            }),
            io: Mutex::new(()),
            synced: AtomicU64::new(len),
            written_bytes: AtomicU64::new(0),
            slot: AtomicU64::new(len),
            strict_sync: std::sync::atomic::AtomicBool::new(false),
            written_back: AtomicU64::new(len),
            own: false,
            version: FORMAT_VERSION,
            first: 0,
            salt: 0,
            prev: Mutex::new(None),
        }
    }

    /// Whether the file may hold a new log once this one is committed:
    /// only when this object wrote every record in it (and the records of
    /// older logs it took over, by induction, are numbered lower still).
    /// A log found at recovery may hold records past its valid prefix
    /// that replay dropped, whose sequence numbers the store hands out
    /// again: a later log in the same file could take them for its own.
    pub fn reusable(&self) -> bool {
        self.own
    }

    /// Gives back the file's blocks past what the log has mapped (a log
    /// that took over a spare's file still holds the older log's records
    /// there, which replay ignores), and past its records and
    /// `TRIM_MARGIN`: an idle store's log then holds about its records and
    /// its preallocation on disk. The mapped range stays allocated, so an
    /// append through the mapping never faults on a hole (on a full disk
    /// that would be SIGBUS, where a growth's `fallocate` gives the error);
    /// so does the next step when a growth ahead is preparing it. The trim
    /// holds the growth ahead's claim otherwise, so none starts meanwhile
    /// (an append that needs room grows the log itself, under the append
    /// locks). Punches `TRIM_CHUNK` at a time from the file's end down,
    /// each under the append locks, so a writer waits for one chunk at
    /// most and a growth meanwhile moves the bound up. Returns the bytes
    /// freed; logs that are not mapped (other storage backends) are left
    /// alone.
    pub fn trim_tail(&self) -> Result<u64> {
        let Some(m) = &self.mapped else {
            return Ok(0);
        };
        let held = m.ahead.hold();
        let trimmed = self.trim_past(m, if held { 0 } else { mapped::STEP });
        if held {
            m.ahead.release();
        }
        trimmed
    }

    /// [`Wal::trim_tail`], keeping `step` bytes past the mapping.
    fn trim_past(&self, m: &Mapped, step: u64) -> Result<u64> {
        // Nothing past the bound to give back when no more than it is
        // allocated (a log trimmed already, or a fresh one): spares the
        // punches and their locks.
        let allocated = self
            .file
            .allocated_bytes()
            .map_err(|e| io_err(&self.name, e))?;
        if allocated <= m.log.lock().capacity() + TRIM_MARGIN + step {
            return Ok(0);
        }
        let mut top = self.file.len().map_err(|e| io_err(&self.name, e))?;
        let mut freed = 0;
        loop {
            let _appends = self.buf.lock();
            let keep = {
                let log = m.log.lock();
                (log.end() + TRIM_MARGIN)
                    .max(log.capacity() + step.min(log.step()))
                    .next_multiple_of(TRIM_ALIGN)
            };
            if top <= keep {
                return Ok(freed);
            }
            let from = top.saturating_sub(TRIM_CHUNK).max(keep);
            freed += self
                .file
                .punch_hole(from, top - from)
                .map_err(|e| io_err(&self.name, e))?;
            top = from;
        }
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
        let delta = if self.version < 3 {
            Some(0)
        } else {
            seq.checked_sub(b.expected)
        };
        let Some(delta) = delta else {
            return Err(Error::InvalidArgument(format!(
                "write-ahead log {}: record {seq} appended after record {}",
                self.name,
                b.expected - 1
            )));
        };
        let synced = self.synced.load(Ordering::Acquire);
        if let Some(m) = &self.mapped {
            // Encode into the (idle) buffer, then copy into the mapping.
            b.bytes.clear();
            let (expected_before, marked_before) = (b.expected, b.marked);
            self.encode(&mut b, seq, delta, synced, payload);
            let mut log = m.log.lock();
            // A failed append is a failed growth (a full disk) and leaves
            // the log as it was: what it holds can still be synced.
            let appended = log.append(&b.bytes);
            m.ahead.note(&log);
            if let Err(e) = appended {
                // Nothing of this append is in the log: its state stays.
                b.expected = expected_before;
                b.marked = marked_before;
                return Err(io_err(&self.name, e));
            }
            self.written_bytes
                .fetch_add(b.bytes.len() as u64, Ordering::Relaxed);
            return Ok(log.end());
        }
        let (len_before, expected_before, marked_before) = (b.bytes.len(), b.expected, b.marked);
        self.encode(&mut b, seq, delta, synced, payload);
        let end = b.start + b.bytes.len() as u64;
        if b.bytes.len() >= FLUSH_BYTES {
            // Hand the buffer to the file unless a sync is doing so already.
            if let Some(_io) = self.io.try_lock() {
                let record = b.bytes.len() - len_before;
                if let Err(e) = self.write_out(b) {
                    // A full device left the buffer whole (`write_out`):
                    // this record leaves it again, as from a mapped log,
                    // so that the failed append logged nothing. (Appends
                    // are serialized by the writer lock: the record is the
                    // buffer's tail.)
                    let mut b = self.buf.lock();
                    if e.is_no_space() && b.failed.is_none() {
                        let keep = b.bytes.len() - record;
                        b.bytes.truncate(keep);
                        b.expected = expected_before;
                        b.marked = marked_before;
                    }
                    return Err(e);
                }
            }
        }
        Ok(end)
    }

    /// Encodes one record into the buffer (version 3: after a sync mark
    /// when a sync completed since the last mark).
    fn encode(&self, b: &mut Buffer, seq: u64, delta: u64, synced: u64, payload: &[u8]) {
        if self.version < 3 {
            encode_record(&mut b.bytes, seq, synced, payload);
            return;
        }
        if synced > b.marked {
            record3::encode_mark(&mut b.bytes, self.salt, synced, b.expected - self.first);
            b.marked = synced;
        }
        record3::encode_batch(&mut b.bytes, self.salt, delta, payload);
        b.expected = seq.saturating_add(1);
        b.fresh = false;
    }

    /// Makes this log the successor of `prev`, the log of generation
    /// `prev_gen`, which takes no more records: appends a chain record
    /// naming `prev`'s end (replay takes this log's records only once
    /// `prev` replayed whole up to there), and keeps `prev` until a sync
    /// of this log has synced it first. So a rotation need not sync
    /// `prev` under the writer lock (docs/DESIGN.md, "Rotation and
    /// backpressure").
    /// Must come before any record.
    pub fn link(&self, prev: Arc<Wal>, prev_gen: u64) -> Result<()> {
        let end = prev.end();
        let mut b = self.buf.lock();
        if let Some(why) = &b.failed {
            return Err(self.stopped(why));
        }
        if !b.fresh || self.version < 3 {
            return Err(Error::InvalidArgument(format!(
                "write-ahead log {}: a chain record after other records",
                self.name
            )));
        }
        *self.prev.lock() = Some(prev);
        if let Some(m) = &self.mapped {
            b.bytes.clear();
            record3::encode_chain(&mut b.bytes, self.salt, prev_gen, end);
            let mut log = m.log.lock();
            let appended = log.append(&b.bytes);
            m.ahead.note(&log);
            appended.map_err(|e| io_err(&self.name, e))?;
            self.written_bytes
                .fetch_add(b.bytes.len() as u64, Ordering::Relaxed);
        } else {
            record3::encode_chain(&mut b.bytes, self.salt, prev_gen, end);
        }
        b.fresh = false;
        Ok(())
    }

    /// Syncs the log before this one if [`Wal::link`] left it (and, by
    /// its own sync, the ones before it), then forgets it.
    fn sync_prev(&self) -> Result<()> {
        let Some(prev) = self.prev.lock().clone() else {
            return Ok(());
        };
        prev.sync()?;
        let mut kept = self.prev.lock();
        if kept.as_ref().is_some_and(|p| Arc::ptr_eq(p, &prev)) {
            *kept = None;
        }
        Ok(())
    }

    /// Writes the buffer to the file (not synced; mapped logs have none):
    /// rotation does so for the log it closes.
    pub fn flush(&self) -> Result<()> {
        if self.mapped.is_some() {
            return Ok(());
        }
        let _io = self.io.lock();
        self.write_out(self.buf.lock())
    }

    /// With `strict`, each sync of this log also writes the length it made
    /// durable into the durable-length slot and syncs again before it
    /// returns (`Options::strict_wal_sync`). Replay takes damage below the
    /// slot's length for corruption, so damage to the records of the last
    /// sync before a crash is reported instead of taken for a torn tail.
    pub fn set_strict_sync(&self, strict: bool) {
        self.strict_sync.store(strict, Ordering::Relaxed);
    }

    /// Makes every record ending at or before `end` durable.
    pub fn sync_to(&self, end: u64) -> Result<()> {
        if self.synced.load(Ordering::Acquire) >= end {
            return Ok(());
        }
        // Logs are durable in order: the one before first.
        self.sync_prev()?;
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
        if self.strict_sync.load(Ordering::Relaxed) && stop > self.slot.load(Ordering::Relaxed) {
            // `stop` is durable now, so the slot may say so whatever
            // order the device writes in.
            let r = self
                .file
                .write_all_at(SLOT_AT, &slot(stop))
                .and_then(|()| self.file.sync());
            if let Err(e) = r {
                self.buf.lock().failed = Some(format!("sync failed: {e}"));
                return Err(io_err(&self.name, e));
            }
            self.slot.store(stop, Ordering::Relaxed);
        }
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
        if self.strict_sync.load(Ordering::Relaxed) && stop > self.slot.load(Ordering::Relaxed) {
            // As in `sync_to`: `stop` is durable, the slot may say so.
            m.log.lock().write_at(SLOT_AT, &slot(stop));
            if let Err(e) = m.sync_file.sync_data() {
                self.buf.lock().failed = Some(format!("sync failed: {e}"));
                return Err(io_err(&self.name, e));
            }
            self.slot.store(stop, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Whether the log, written up to `end` (as [`Wal::append`] returned),
    /// is due a [`Wal::write_back`]: a mapped log with
    /// `writeback::WRITEBACK_BYTES` appended since the last one. One
    /// relaxed load, for every append.
    pub fn write_back_due(&self, end: u64) -> bool {
        self.mapped.is_some()
            && end >= self.written_back.load(Ordering::Relaxed) + writeback::WRITEBACK_BYTES
    }

    /// Asks the kernel to start writing what was appended since the last
    /// request to the device, without waiting (a hint: see `writeback`).
    /// Of callers racing for the same stretch, one makes the request.
    pub fn write_back(&self, end: u64) {
        let Some(m) = &self.mapped else { return };
        let stop = writeback::stop_at(end);
        let from = self.written_back.load(Ordering::Relaxed);
        if stop <= from
            || self
                .written_back
                .compare_exchange(from, stop, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        // The stretch's pages leave this process's page tables first, so
        // that writing them back needs no TLB shootdown per page. Nothing
        // appends below `stop` any more (only the header's slot, on the
        // first page, is rewritten, and that just maps its page again).
        let spans = m.log.lock().spans(from, stop);
        for span in spans {
            // SAFETY: the span is one of the log's mappings, which live as
            // long as `self`, borrowed for this call. A hint: a failure
            // changes nothing.
            let _ = unsafe { mapped::release_pages(span) };
        }
        // A hint: a failure changes nothing the sync would not report.
        m.sync_file.start_write_back(from, stop - from);
    }

    /// Whether the log, written up to `end` (as [`Wal::append`] returned),
    /// should grow ahead of its writers now (a mapped log with less than
    /// half a growth step left); if so the growth is claimed, and the
    /// caller must run [`Wal::grow_ahead`], off the writer lock. A few
    /// relaxed loads when not due.
    pub fn claim_grow_ahead(&self, end: u64) -> bool {
        self.mapped.as_ref().is_some_and(|m| m.ahead.claim(end))
    }

    /// Grows the log by a step ahead of need (`grow_ahead`), after
    /// [`Wal::claim_grow_ahead`]. A failure changes nothing: the append
    /// that needs the room grows the log itself and reports it.
    pub fn grow_ahead(&self) {
        if let Some(m) = &self.mapped {
            m.ahead.run(&m.log);
        }
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
            let mut b = self.buf.lock();
            if crate::error::storage_full(&e) {
                // A full device: the bytes go back in front of what was
                // appended meanwhile, to be written again from `start` by
                // the next write-out (over whatever part of them landed).
                let mut data = data;
                data.extend_from_slice(&b.bytes);
                b.bytes = data;
                b.start = start;
            } else {
                b.failed = Some(format!("write failed: {e}"));
            }
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

pub(super) fn io_err(name: &str, source: std::io::Error) -> Error {
    crate::error::io_err(name)(source)
}

#[cfg(test)]
mod test_support;
#[cfg(test)]
mod tests3;

#[cfg(test)]
mod tests {
    use super::test_support::{self, bytes_of, damaged_copies, mem};
    use super::*;
    use flexspace::MemFile;

    // Most tests here read logs of version 2 (which this build still
    // replays) against a reference reading of that version; those of
    // version 3 are in `tests3`.

    /// A new, empty version-2 log in `file`.
    fn create2(file: Arc<dyn StorageFile>, name: &str, first: u64) -> Result<Wal> {
        file.set_len(0).unwrap();
        Wal::reuse_as(file, name, None, first, 2, 0)
    }

    /// A version-2 log taking over `file`.
    fn reuse2(file: Arc<dyn StorageFile>, name: &str, first: u64) -> Result<Wal> {
        Wal::reuse_as(file, name, None, first, 2, 0)
    }

    #[test]
    fn records_replay_in_order() {
        let f = mem();
        let wal = create2(f.clone(), "wal", 0).unwrap();
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
        let wal = create2(f.clone(), "wal", 0).unwrap();
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
        let wal = create2(f.clone(), "wal", 0).unwrap();
        for i in 0..10u8 {
            wal.append(u64::from(i), &[i; 20]).unwrap();
        }
        wal.sync().unwrap();
        let len = f.len().unwrap();
        for cut in [len - 1, len - 20, len - 36, HEADER_LEN + 5, HEADER_LEN] {
            let mut b = vec![0; cut as usize];
            f.read_exact_at(0, &mut b).unwrap();
            let recs = Wal::read(&MemFile::from_bytes(b), "wal").unwrap();
            assert!(recs.len() < 10);
            for (i, r) in recs.iter().enumerate() {
                assert_eq!(r.payload, [i as u8; 20]);
            }
        }
    }

    #[test]
    fn a_log_cut_inside_its_header_is_corruption() {
        // A log is renamed into place only once its header is durable, so a
        // torn header cannot be a crash during creation: the log's writes
        // are gone, and replay says so.
        let f = mem();
        let wal = create2(f.clone(), "wal", 0).unwrap();
        wal.append(1, b"synced").unwrap();
        wal.sync().unwrap();
        for cut in [0, 3, HEADER_LEN - 1] {
            let mut b = vec![0; cut as usize];
            f.read_exact_at(0, &mut b).unwrap();
            let e = Wal::read(&MemFile::from_bytes(b), "wal").unwrap_err();
            assert!(e.is_corruption(), "cut at {cut}: {e}");
        }
    }

    /// A log of records 0..5, synced, then records 5..7 (not synced).
    fn two_batches() -> Arc<dyn StorageFile> {
        let f = mem();
        let wal = create2(f.clone(), "wal", 0).unwrap();
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
                expected: 0,
                marked: HEADER_LEN,
                fresh: false,
                failed: None,
            }),
            io: Mutex::new(()),
            synced: AtomicU64::new(HEADER_LEN + 5 * (RECORD_HEAD as u64 + 8)),
            written_bytes: AtomicU64::new(0),
            slot: AtomicU64::new(HEADER_LEN),
            strict_sync: std::sync::atomic::AtomicBool::new(false),
            written_back: AtomicU64::new(HEADER_LEN),
            own: true,
            version: 2,
            first: 0,
            salt: 0,
            prev: Mutex::new(None),
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
        let wal = create2(g.clone(), "wal", 0).unwrap();
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
        // A torn header: a log is named only once its header is durable, so
        // this is damage too, not a crash while the log was created.
        let f = MemFile::from_bytes(vec![1, 2]);
        assert!(matches!(Wal::read(&f, "x"), Err(Error::Corrupt { .. })));
        let f = MemFile::from_bytes(b"FLEXWAL".to_vec());
        assert!(matches!(Wal::read(&f, "x"), Err(Error::Corrupt { .. })));
    }

    #[test]
    fn concurrent_syncers_share_the_log() {
        let file = Arc::new(MemFile::new());
        let f: Arc<dyn StorageFile> = file.clone();
        let wal = Arc::new(create2(f.clone(), "wal", 0).unwrap());
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

    /// The replay of the previous format revision, kept as the reference
    /// the chunked one must agree with: the whole file read at once,
    /// records collected, the damage scan byte by byte.
    fn reference_record_at(bytes: &[u8], pos: usize, after: Option<u64>) -> Option<(Record, u64)> {
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

    fn reference_read(file: &dyn StorageFile, name: &str) -> Result<Vec<Record>> {
        let corrupt = |detail: &str| Error::Corrupt {
            file: name.into(),
            detail: detail.to_string(),
        };
        let len = file.len().map_err(|e| io_err(name, e))?;
        let mut bytes = vec![0u8; len as usize];
        file.read_exact_at(0, &mut bytes)
            .map_err(|e| io_err(name, e))?;
        // A log is named only once its header is durable: a torn or
        // foreign header is damage.
        if len < V1_HEADER_LEN {
            return Err(corrupt("truncated inside its header"));
        }
        let n = header_len(&bytes).map_err(|e| corrupt(&e))?;
        if len < n {
            return Err(corrupt("truncated inside its header"));
        }
        let Header {
            len: records_at,
            floor,
            durable,
            ..
        } = parse_header(&bytes).map_err(|e| corrupt(&e))?;
        if len < durable {
            return Err(corrupt(&format!(
                "truncated to {len} bytes, below the {durable} bytes it had synced"
            )));
        }
        let mut records: Vec<Record> = Vec::new();
        let mut pos = records_at as usize;
        while let Some((r, _)) =
            reference_record_at(&bytes, pos, records.last().map(|r| r.seq).or(floor))
        {
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
            let after = records.last().map(|r| r.seq).or(floor);
            let damaged_durable = (pos + 1..bytes.len()).any(|p| {
                let Some(h) = bytes.get(p..p + RECORD_HEAD) else {
                    return false;
                };
                let seq = u64_at(h, 8);
                let plausible = match after {
                    Some(a) => seq > a && seq - a <= (p - pos) as u64 + 1,
                    None => true,
                };
                plausible
                    && u64_at(h, 16) > pos as u64
                    && reference_record_at(&bytes, p, after).is_some()
            });
            if damaged_durable {
                return Err(corrupt(&format!(
                    "the record at byte {pos} is damaged, but a later record shows it was synced"
                )));
            }
        }
        Ok(records)
    }

    /// What replay with `chunk`-byte reads gives: the records, or the
    /// error's kind.
    fn replay_with(f: &dyn StorageFile, chunk: usize) -> std::result::Result<Vec<Record>, bool> {
        test_support::replay_with(f, chunk).map(|(recs, _)| recs)
    }

    /// Chunk sizes around and below the record sizes of the tests.
    const CHUNKS: [usize; 7] = [1, 24, 25, 31, 100, 4096, REPLAY_CHUNK];

    /// Replays the log `b` whole, in every chunk size of `CHUNKS` and as
    /// the reference, asserts that all agree, and returns the verdict.
    fn judged_alike(b: Vec<u8>, what: &str) -> std::result::Result<Vec<Record>, bool> {
        let file = MemFile::from_bytes(b);
        let whole = replay_with(&file, usize::MAX >> 1);
        let reference = reference_read(&file, "wal").map_err(|e| e.is_corruption());
        assert_eq!(whole, reference, "{what}: differs from the reference");
        for chunk in CHUNKS {
            assert_eq!(replay_with(&file, chunk), whole, "{what}, chunk {chunk}");
        }
        whole
    }

    #[test]
    fn chunked_replay_reads_records_across_chunks_and_larger_than_one() {
        let f = mem();
        let wal = create2(f.clone(), "wal", 0).unwrap();
        let mut want = Vec::new();
        let mut seq = 1;
        for i in 0..300usize {
            // Mostly small records; some far larger than the small chunks.
            let n = if i % 50 == 7 { 20_000 + i } else { 1 + i % 97 };
            let payload: Vec<u8> = (0..n).map(|j| (i * 31 + j) as u8).collect();
            wal.append(seq, &payload).unwrap();
            want.push(Record { seq, payload });
            seq += 1 + (i as u64 % 3);
        }
        wal.sync().unwrap();
        for chunk in CHUNKS {
            assert_eq!(
                replay_with(f.as_ref(), chunk),
                Ok(want.clone()),
                "chunk {chunk}"
            );
        }
        assert_eq!(Wal::read(f.as_ref(), "wal").unwrap(), want);
    }

    #[test]
    fn chunked_replay_judges_damage_as_whole_reads_do() {
        // Every truncation and every flipped byte of a log (synced in two
        // stretches, then an unsynced one) gives the same records or the
        // same error whatever the chunk size, and as the reference.
        let f = mem();
        let wal = create2(f.clone(), "wal", 0).unwrap();
        for i in 0..12u8 {
            wal.append(u64::from(i) * 2, &vec![i; 10 + usize::from(i) * 7])
                .unwrap();
            if i == 4 || i == 8 {
                wal.sync().unwrap();
            }
        }
        wal.flush().unwrap();
        let bytes = bytes_of(f.as_ref());
        let mut outcomes = [0usize; 3];
        let mut check = |b: Vec<u8>, what: &str| match judged_alike(b, what) {
            Ok(r) if r.len() == 12 => outcomes[0] += 1,
            Ok(_) => outcomes[1] += 1,
            Err(_) => outcomes[2] += 1,
        };
        // Zeroed stretches are pages a device never wrote.
        damaged_copies(&bytes, 8, 40, 500, &mut check);
        // Each kind of outcome happened.
        assert!(outcomes.iter().all(|&n| n > 0), "{outcomes:?}");
    }

    #[test]
    fn a_zero_tail_ends_replay_but_not_the_damage_check() {
        let record = RECORD_HEAD + 8;
        let f = two_batches();
        let mut bytes = bytes_of(f.as_ref());
        let logged = bytes.len();
        // A preallocated tail of zeros, as a mapped log leaves.
        bytes.resize(logged + (3 << 20), 0);
        for chunk in [100, 4096, REPLAY_CHUNK] {
            let recs = replay_with(&MemFile::from_bytes(bytes.clone()), chunk).unwrap();
            assert_eq!(recs.len(), 7, "chunk {chunk}");
        }
        // An all-zero header never verifies, so stopping there is exact.
        assert_ne!(crc32c::crc32c(&[0u8; RECORD_HEAD - 4]), 0);
        // Synced record 2 zeroed (a device that never wrote its page): the
        // intact records after it, appended after the sync that covered
        // it, show it was synced. Zero skipping must not hide them.
        let mut b = bytes.clone();
        let at = HEADER_LEN as usize + 2 * record;
        b[at..at + record].fill(0);
        for chunk in [1, 30, 100, 4096, REPLAY_CHUNK] {
            assert_eq!(
                replay_with(&MemFile::from_bytes(b.clone()), chunk),
                Err(true),
                "chunk {chunk}"
            );
        }
        // A vouching record far out in a zero tail is found too.
        let mut b = bytes.clone();
        let far = logged + (2 << 20) + 13;
        let mut rec = Vec::new();
        encode_record(&mut rec, 7, logged as u64, b"x");
        b[far..far + rec.len()].copy_from_slice(&rec);
        b[HEADER_LEN as usize + 5 * record] ^= 1;
        for chunk in [100, 4096, REPLAY_CHUNK] {
            assert_eq!(
                replay_with(&MemFile::from_bytes(b.clone()), chunk),
                Err(true),
                "chunk {chunk}"
            );
        }
    }

    /// A file holding an older log of `n` records (numbered from 1, of
    /// varied sizes, synced), for a new log to take over.
    fn file_with_old_log(n: u64) -> Arc<dyn StorageFile> {
        let f = mem();
        let old = create2(f.clone(), "old", 1).unwrap();
        for seq in 1..=n {
            old.append(seq, &vec![seq as u8; 1 + (seq as usize * 7) % 90])
                .unwrap();
        }
        old.sync().unwrap();
        f
    }

    #[test]
    fn a_log_that_takes_over_a_file_replays_only_its_own_records() {
        for new_records in [0u64, 1, 5, 40] {
            let f = file_with_old_log(200);
            let old_len = f.len().unwrap();
            let wal = reuse2(f.clone(), "wal", 201).unwrap();
            let mut want = Vec::new();
            for i in 0..new_records {
                let payload = vec![0xA0 ^ i as u8; 3 + i as usize];
                wal.append(201 + i, &payload).unwrap();
                want.push(Record {
                    seq: 201 + i,
                    payload,
                });
            }
            wal.sync().unwrap();
            // The old records are still there, past the new ones.
            assert_eq!(f.len().unwrap(), old_len);
            for chunk in CHUNKS {
                assert_eq!(
                    replay_with(f.as_ref(), chunk),
                    Ok(want.clone()),
                    "{new_records} records, chunk {chunk}"
                );
            }
            assert_eq!(reference_read(f.as_ref(), "wal").unwrap(), want);
        }
    }

    #[test]
    fn damage_to_a_log_in_a_taken_over_file_is_judged_as_in_a_new_one() {
        // Every truncation and flipped byte of the new log's part gives the
        // same verdict at every chunk size and as the reference, and never
        // a record of the old log.
        let f = file_with_old_log(60);
        let wal = reuse2(f.clone(), "wal", 61).unwrap();
        for i in 0..8u64 {
            wal.append(61 + 2 * i, &vec![i as u8; 5 + 9 * i as usize])
                .unwrap();
            if i == 3 {
                wal.sync().unwrap();
            }
        }
        wal.flush().unwrap();
        let new_end = wal.end() as usize;
        let bytes = bytes_of(f.as_ref());
        let mut outcomes = [0usize; 3];
        let mut check = |b: Vec<u8>, what: &str| match judged_alike(b, what) {
            Ok(r) => {
                assert!(r.iter().all(|r| r.seq >= 61), "{what}: an old record");
                outcomes[usize::from(r.len() != 8)] += 1;
            }
            Err(_) => outcomes[2] += 1,
        };
        for at in 0..new_end {
            let mut b = bytes.clone();
            b[at] ^= 0x10;
            check(b, &format!("flip at {at}"));
        }
        for cut in (HEADER_LEN as usize..new_end + 200).step_by(3) {
            check(bytes[..cut].to_vec(), &format!("cut at {cut}"));
        }
        assert!(outcomes.iter().all(|&n| n > 0), "{outcomes:?}");
    }

    #[test]
    fn a_version_1_log_still_replays() {
        // The previous format: a 32-byte header without a first sequence
        // number, then the same records.
        let mut b = Vec::new();
        b.extend_from_slice(MAGIC);
        b.extend_from_slice(&1u32.to_le_bytes());
        b.extend_from_slice(&[0; 4]);
        b.extend_from_slice(&slot(V1_HEADER_LEN));
        let mut want = Vec::new();
        for seq in 0..20u64 {
            let payload = vec![seq as u8; 1 + seq as usize];
            encode_record(&mut b, seq, V1_HEADER_LEN, &payload);
            want.push(Record { seq, payload });
        }
        b.resize(b.len() + 1000, 0);
        let f = MemFile::from_bytes(b);
        for chunk in CHUNKS {
            assert_eq!(replay_with(&f, chunk), Ok(want.clone()), "chunk {chunk}");
        }
        assert_eq!(reference_read(&f, "wal").unwrap(), want);
    }

    #[test]
    fn a_damaged_first_sequence_number_is_corruption() {
        let f = file_with_old_log(10);
        let wal = reuse2(f.clone(), "wal", 11).unwrap();
        wal.append(11, b"new").unwrap();
        wal.sync().unwrap();
        for at in FIRST_AT..FIRST_AT + 12 {
            let mut b = bytes_of(f.as_ref());
            b[at] ^= 0x04;
            let e = Wal::read(&MemFile::from_bytes(b), "wal").unwrap_err();
            assert!(e.is_corruption(), "flip at {at}: {e}");
            assert!(e.to_string().contains("first sequence number"), "{e}");
        }
        // A header cut short of its second half is a torn header.
        let b = bytes_of(f.as_ref())[..40].to_vec();
        assert!(Wal::read(&MemFile::from_bytes(b), "wal")
            .unwrap_err()
            .is_corruption());
    }

    #[test]
    fn only_a_log_this_process_wrote_may_give_its_file_to_another() {
        let f = file_with_old_log(3);
        assert!(create2(mem(), "a", 1).unwrap().reusable());
        assert!(reuse2(f.clone(), "b", 4).unwrap().reusable());
        let len = f.len().unwrap();
        assert!(!Wal::detached(f, "c", len).reusable());
    }

    #[test]
    fn a_mapped_log_takes_over_a_file_in_place() {
        let (dir, file, wal) = mapped_wal(1 << 20);
        for i in 1..=5000u64 {
            wal.append(i, &[i as u8; 100]).unwrap();
        }
        wal.sync().unwrap();
        let len = file.len().unwrap();
        drop(wal);
        let path = dir.path().join("wal");
        let wal = Wal::reuse(
            file.clone(),
            "wal",
            Some((mapped::tests::real(&path), 1 << 20)),
            5001,
            0,
        )
        .unwrap();
        assert!(wal.mapped.is_some());
        for i in 5001..=5010u64 {
            wal.append(i, &[i as u8; 100]).unwrap();
        }
        wal.sync().unwrap();
        // Nothing truncated or reallocated: the same file, written in place.
        assert_eq!(file.len().unwrap(), len);
        let recs = Wal::read(file.as_ref(), "wal").unwrap();
        let seqs: Vec<u64> = recs.iter().map(|r| r.seq).collect();
        assert_eq!(seqs, (5001..=5010).collect::<Vec<_>>());
    }

    /// Blocks the file system may count beyond a file's data: `st_blocks`
    /// includes ext4's extent-tree blocks, which a file with punched holes
    /// needs.
    const FS_METADATA: u64 = 64 << 10;

    /// A log that took over a bigger log's file gives back the blocks past
    /// its records and margin (the older records, the preallocation), keeps
    /// its own, and replays exactly them; appends after the trim land in
    /// the punched range and replay too.
    #[test]
    fn trimming_a_taken_over_log_frees_its_tail_and_keeps_its_records() {
        const OLD: u64 = 200_000;
        let (dir, file, wal) = mapped_wal(1 << 20);
        for i in 1..=OLD {
            wal.append(i, &[i as u8; 500]).unwrap();
        }
        wal.sync().unwrap();
        drop(wal);
        let path = dir.path().join("wal");
        let wal = Wal::reuse(
            file.clone(),
            "wal",
            Some((mapped::tests::real(&path), 1 << 20)),
            OLD + 1,
            0,
        )
        .unwrap();
        for i in OLD + 1..=OLD + 100 {
            wal.append(i, &[i as u8; 500]).unwrap();
        }
        wal.sync().unwrap();
        let before = file.allocated_bytes().unwrap();
        assert!(before >= 95 << 20, "the older log's blocks: {before}");
        let freed = wal.trim_tail().unwrap();
        let after = file.allocated_bytes().unwrap();
        assert!(
            freed > 0 && after < before,
            "{before} -> {after}, freed {freed}"
        );
        // What stays: the mapping (1 MiB) or the records and the margin,
        // and no step (no growth ahead was under way).
        let (cap, end, step) = {
            let log = wal.mapped.as_ref().unwrap().log.lock();
            (log.capacity(), log.end(), log.step())
        };
        let keep = cap.max(end + TRIM_MARGIN);
        assert!(
            after <= keep + TRIM_ALIGN + FS_METADATA && keep < cap + step,
            "{after} allocated for a mapping of {cap} and records to {end}"
        );
        // A second trim finds nothing more to give back.
        assert_eq!(wal.trim_tail().unwrap(), 0);
        // Appends past the mapping and the step, into the punched range
        // (the growths allocate it again); then every record replays.
        // (Replayed before these appends, the older records left inside
        // the step would be searched byte by byte: minutes in a test.)
        for i in OLD + 101..=OLD + 180_000 {
            wal.append(i, &[i as u8; 500]).unwrap();
        }
        wal.sync().unwrap();
        let seqs: Vec<u64> = Wal::read(file.as_ref(), "wal")
            .unwrap()
            .iter()
            .map(|r| r.seq)
            .collect();
        assert_eq!(seqs, (OLD + 1..=OLD + 180_000).collect::<Vec<_>>());
    }

    /// A log on a real file in a new directory, mapped with room for
    /// `capacity` bytes at first.
    fn mapped_wal(capacity: u64) -> (tempfile::TempDir, Arc<dyn StorageFile>, Wal) {
        let dir = tempfile::tempdir().unwrap();
        let storage = flexspace::FileStorage::open(dir.path(), true).unwrap();
        let file = flexspace::Storage::open_file(&storage, "wal", true).unwrap();
        let mappable = flexspace::Storage::open_mappable(&storage, "wal")
            .unwrap()
            .unwrap();
        let wal = Wal::create(file.clone(), "wal", Some((mappable, capacity)), 0, 0).unwrap();
        (dir, file, wal)
    }

    #[test]
    fn a_mapped_log_replays_through_its_zero_tail() {
        let (_dir, file, wal) = mapped_wal(1 << 20);
        assert!(wal.mapped.is_some());
        for i in 0..1000u64 {
            wal.append(i, &i.to_le_bytes()).unwrap();
        }
        wal.sync().unwrap();
        // Preallocated well past the records.
        assert!(file.len().unwrap() > wal.end() + (512 << 10));
        let recs = Wal::read(file.as_ref(), "wal").unwrap();
        assert_eq!(recs.len(), 1000);
        assert!(recs.iter().enumerate().all(|(i, r)| r.seq == i as u64));
    }

    #[test]
    fn a_mapped_log_is_written_back_every_few_mib_and_replays_whole() {
        let (_dir, file, wal) = mapped_wal(1 << 20);
        let payload = [7u8; 1000];
        let (mut requests, mut last_mark) = (0, HEADER_LEN);
        for i in 0..12_000u64 {
            let end = wal.append(i, &payload).unwrap();
            if wal.write_back_due(end) {
                wal.write_back(end);
                // A second request for the same stretch does nothing.
                wal.write_back(end);
                let mark = wal.written_back.load(Ordering::Relaxed);
                assert_eq!(mark, writeback::stop_at(end));
                assert!(mark - last_mark >= writeback::WRITEBACK_BYTES - 4096);
                last_mark = mark;
                requests += 1;
            }
        }
        // 12 MB of records: two requests (at 4 and 8 MiB).
        assert_eq!(requests, 2);
        wal.sync().unwrap();
        let recs = Wal::read(file.as_ref(), "wal").unwrap();
        assert_eq!(recs.len(), 12_000);
        assert!(recs.iter().all(|r| r.payload == payload));
        // Buffered logs are never due.
        let buffered = create2(Arc::new(MemFile::new()), "wal", 0).unwrap();
        let end = buffered.append(0, &[0u8; 5 << 20]).unwrap();
        assert!(!buffered.write_back_due(end));
    }

    #[test]
    fn a_full_disk_refuses_the_append_and_keeps_the_log() {
        let (_dir, file, wal) = mapped_wal(1);
        let Some(m) = &wal.mapped else {
            panic!("the log is not mapped");
        };
        let cap = file.len().unwrap();
        m.log.lock().fail_past(Some(cap));
        let payload = [9u8; 1000];
        let mut n = 0;
        let err = loop {
            match wal.append(n, &payload) {
                Ok(_) => n += 1,
                Err(e) => break e,
            }
        };
        assert!(n > 0);
        match &err {
            Error::NoSpace(why) => {
                assert!(why.starts_with("wal: "), "{why}");
                assert!(why.contains("os error 28"), "{why}");
            }
            e => panic!("unexpected error {e}"),
        }
        // What was appended before can still be made durable, and is all
        // there.
        wal.sync().unwrap();
        assert_eq!(Wal::read(file.as_ref(), "wal").unwrap().len() as u64, n);
        // Space again: appends go on.
        m.log.lock().fail_past(None);
        wal.append(n, &payload).unwrap();
        wal.sync().unwrap();
        assert_eq!(Wal::read(file.as_ref(), "wal").unwrap().len() as u64, n + 1);
    }

    /// A buffered log (storage without mappings) on a full device: the
    /// append whose write-out is refused fails with `NoSpace` and logs
    /// nothing, the records before it stay buffered (a sync fails too),
    /// and once there is room they and the next append reach the file.
    #[test]
    fn a_full_disk_refuses_a_buffered_append_and_logs_nothing_of_it() {
        use flexspace::Storage;
        let st = flexspace::FaultStorage::new();
        let file = st.open_file("wal", true).unwrap();
        let wal = Wal::create(file.clone(), "wal", None, 0, 0).unwrap();
        st.fill_device(0);
        let payload = [9u8; 1000];
        let mut n = 0;
        let err = loop {
            match wal.append(n, &payload) {
                Ok(_) => n += 1,
                Err(e) => break e,
            }
        };
        assert!(n > 0);
        assert!(err.is_no_space(), "{err}");
        assert!(wal.append(n, &payload).unwrap_err().is_no_space());
        assert!(wal.sync().unwrap_err().is_no_space());
        assert!(st.refused_writes() >= 3);
        st.free_device();
        wal.append(n, &payload).unwrap();
        wal.sync().unwrap();
        let records = Wal::read(file.as_ref(), "wal").unwrap();
        assert_eq!(records.len() as u64, n + 1);
        assert!(records.iter().zip(0..).all(|(r, i)| r.seq == i));
    }

    #[test]
    fn a_mapped_log_grows_ahead_of_its_appends_and_replays_whole() {
        // Expected to need 100 MiB: 65 MiB mapped at first, a step of
        // 64 MiB ahead once less than 32 MiB is left.
        let (_dir, file, wal) = mapped_wal(100 << 20);
        let Some(m) = &wal.mapped else {
            panic!("the log is not mapped");
        };
        let first = m.log.lock().capacity();
        let payload = [3u8; 4000];
        let (mut n, mut claims) = (0u64, 0);
        while claims == 0 || n < 20_000 {
            let cap = m.log.lock().capacity();
            let end = wal.append(n, &payload).unwrap();
            n += 1;
            assert_eq!(m.log.lock().capacity(), cap, "an append grew the log");
            if wal.claim_grow_ahead(end) {
                assert!(end + mapped::STEP / 2 >= first && end < first);
                wal.grow_ahead();
                assert_eq!(m.log.lock().capacity(), first + mapped::STEP);
                claims += 1;
            }
        }
        // Past the size expected: no second step ahead.
        assert_eq!(claims, 1);
        wal.sync().unwrap();
        let recs = Wal::read(file.as_ref(), "wal").unwrap();
        assert_eq!(recs.len() as u64, n);
        assert!(recs.iter().all(|r| r.payload == payload));
    }
}
