//! A write-ahead log file appended through shared memory mappings.
//!
//! The file and its mappings come from the storage backend
//! (`flexspace::MappableFile`): real files in production, the
//! fault-injecting backend in the crash tests, which run this same code.
//! Copying a record into a `MAP_SHARED` mapping puts it in the operating
//! system's page cache at once: it survives the death of the process (a
//! `SIGKILL`, a panic elsewhere) without a system call per write, which a
//! `write` would cost (about 1.4 µs a record here, measured in
//! docs/DESIGN.md). `fdatasync` on the file makes it durable as usual.
//!
//! The file grows in bounded steps: a first mapping sized for the log the
//! caller expects (at most [`FIRST_MAX`]), then one new mapping of
//! [`STEP`] bytes at a time, each over a freshly preallocated stretch at the
//! end of the file. Growing never remaps or copies what is written. A step
//! is planned under the caller's lock ([`MappedLog::plan_growth`]), carried
//! out (preallocated, mapped) without it ([`Growth::prepare`]), and
//! installed under it again ([`MappedLog::install`]), so that a thread can
//! grow the log ahead of its writers (`wal::grow_ahead`); an append that
//! finds no room grows it itself, all three steps at once.
//!
//! Invariants:
//! - The file's blocks are allocated (`fallocate`) before they are mapped,
//!   so touching a mapped page never needs space the disk might not have
//!   (which would raise `SIGBUS`); a log that cannot be preallocated is not
//!   mapped at all (the caller falls back to buffered writes).
//! - The mappings are contiguous and in file order: mapping `i` starts
//!   where mapping `i - 1` ends, the first at offset 0, and every start is
//!   a multiple of the page size; `cap` is the end of the last one.
//! - A failed growth (the disk is full) changes nothing: `end`, the
//!   mappings and every byte written stay as they were, so what was
//!   appended before can still be synced, and a later append may retry.
//! - A stretch is installed only where the last mapping ends (`cap`);
//!   one prepared for an end that has moved since is dropped (unmapped),
//!   so two growths racing never leave a hole or an overlap.
//! - Only this object writes the file while it lives (the store holds the
//!   directory's lock), so the mappings are never changed behind its back.
//! - `end <= cap`; `end` only grows; bytes past it are zero, or records of
//!   an older log whose file this one took over (`spare_logs`), which the
//!   log's header rules out at replay.

use std::io;
use std::sync::Arc;

use flexspace::{MappableFile, WritableMap};

/// The largest first mapping: a log whose MemTable is bigger grows in
/// steps as it fills.
pub(crate) const FIRST_MAX: u64 = 65 << 20;
/// Bytes each later mapping adds.
pub(crate) const STEP: u64 = 64 << 20;
/// Mapping sizes are rounded up to this (a multiple of any page size).
const ALIGN: u64 = 1 << 20;

/// A preallocated, mapped log file.
pub(crate) struct MappedLog {
    file: Arc<dyn MappableFile>,
    /// `(start, mapping)` in file order, contiguous from offset 0.
    maps: Vec<(u64, WritableMap)>,
    /// The end of the last mapping (bytes preallocated and mapped).
    cap: u64,
    /// Bytes in use (header and records).
    end: u64,
    /// Bytes each growth adds ([`STEP`]; smaller in tests).
    step: u64,
    /// Tests: preallocating past this length fails as a full disk would.
    #[cfg(test)]
    fail_past: Option<u64>,
}

/// One step of growth, planned under the log's lock
/// ([`MappedLog::plan_growth`]), to carry out without it.
pub(crate) struct Growth {
    file: Arc<dyn MappableFile>,
    at: u64,
    len: u64,
    #[cfg(test)]
    fail_past: Option<u64>,
}

/// A stretch of the file preallocated and mapped past the log's end,
/// waiting to be installed ([`MappedLog::install`]).
pub(crate) struct Stretch {
    at: u64,
    map: WritableMap,
}

impl Growth {
    /// Preallocates the stretch, then maps it. Fails (with `ENOSPC` when
    /// the disk is full) having installed nothing: the log is unchanged.
    pub fn prepare(self) -> io::Result<Stretch> {
        #[cfg(test)]
        if self.fail_past.is_some_and(|l| self.at + self.len > l) {
            return Err(io::Error::from_raw_os_error(libc::ENOSPC));
        }
        let map = self.file.map_writable(self.at, self.len).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "cannot preallocate {} more bytes of the log past {}: {e}",
                    self.len, self.at
                ),
            )
        })?;
        Ok(Stretch { at: self.at, map })
    }
}

/// Takes the pages of `span` (from [`MappedLog::spans`], page-aligned) out
/// of this process's page tables, leaving them, and their contents, in the
/// page cache: a later access maps them again. Why: writing back a page
/// that is still mapped makes the kernel write-protect it first, which
/// costs a TLB shootdown (an interprocessor interrupt) per page; for pages
/// no longer mapped it costs nothing, and dropping a whole span flushes
/// the TLB once. docs/DESIGN.md, "The writers' own limit, and three
/// changes to their path", has the measurement. A hint like the write-back itself:
/// a failure changes nothing and is ignored by callers.
///
/// # Safety
/// `span` must lie inside a live mapping of a [`MappedLog`]: one it
/// returned from [`MappedLog::spans`] while that log is still alive.
pub unsafe fn release_pages(span: (usize, usize)) -> io::Result<()> {
    // SAFETY: the caller guarantees that the span lies inside one of our
    // `MAP_SHARED` file mappings. For such a mapping `MADV_DONTNEED` only
    // zaps page-table entries (a dirty entry marks its page dirty in the
    // page cache): the file's bytes, and so what any later read or write
    // through the mapping sees, do not change, and the mapping stays.
    let rc = unsafe { libc::madvise(span.0 as *mut libc::c_void, span.1, libc::MADV_DONTNEED) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `ALIGN`, or the page size when that is bigger (no known system).
fn align() -> u64 {
    // SAFETY: sysconf only reads a system constant.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(page).map_or(ALIGN, |p| p.max(ALIGN))
}

fn round_up(n: u64, to: u64) -> u64 {
    n.div_ceil(to).saturating_mul(to)
}

impl MappedLog {
    /// Maps the log in `file`, whose first `end` bytes (its header) are
    /// written already, with room for `capacity` bytes to begin with (at
    /// most [`FIRST_MAX`]; it grows by [`STEP`] as needed).
    pub fn open(file: Arc<dyn MappableFile>, end: u64, capacity: u64) -> io::Result<MappedLog> {
        Self::open_with_step(file, end, capacity.min(FIRST_MAX), STEP)
    }

    /// [`MappedLog::open`] with growth steps of `step` bytes (tests take
    /// small ones).
    pub(super) fn open_with_step(
        file: Arc<dyn MappableFile>,
        end: u64,
        first: u64,
        step: u64,
    ) -> io::Result<MappedLog> {
        let a = align();
        let first = round_up(first.max(end + 1), a);
        let m = file.map_writable(0, first)?;
        Ok(MappedLog {
            file,
            maps: vec![(0, m)],
            cap: first,
            end,
            step: round_up(step, a),
            #[cfg(test)]
            fail_past: None,
        })
    }

    /// Bytes in use.
    pub fn end(&self) -> u64 {
        self.end
    }

    /// Bytes preallocated (and mapped).
    pub fn capacity(&self) -> u64 {
        self.cap
    }

    /// Bytes each growth adds.
    pub fn step(&self) -> u64 {
        self.step
    }

    /// Appends `bytes`, growing the file by steps as needed. When growing
    /// fails (a full disk) nothing is appended and the log stays usable.
    pub fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        let need = self
            .end
            .checked_add(bytes.len() as u64)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "log too long"))?;
        while need > self.cap {
            self.grow()?;
        }
        self.copy_in(self.end, bytes);
        self.end = need;
        Ok(())
    }

    /// Adds one step at the end of the file: preallocated, then mapped.
    fn grow(&mut self) -> io::Result<()> {
        let stretch = self.plan_growth().prepare()?;
        self.install(stretch);
        Ok(())
    }

    /// The next step past the end of the last mapping, for the caller to
    /// prepare without holding this object ([`Growth::prepare`]).
    pub fn plan_growth(&self) -> Growth {
        Growth {
            file: self.file.clone(),
            at: self.cap,
            len: self.step,
            #[cfg(test)]
            fail_past: self.fail_past,
        }
    }

    /// Adds `stretch` as the log's last mapping if it starts where the
    /// last one ends; returns false, dropping it, when the log grew
    /// meanwhile (its bytes were preallocated all the same, which changes
    /// nothing a reader sees: they are zeros past `end`).
    pub fn install(&mut self, stretch: Stretch) -> bool {
        if stretch.at != self.cap {
            return false;
        }
        self.cap += stretch.map.len() as u64;
        self.maps.push((stretch.at, stretch.map));
        true
    }

    /// Copies `bytes` to file offset `at` (`at + len <= cap`), across
    /// mappings as needed.
    fn copy_in(&mut self, mut at: u64, mut bytes: &[u8]) {
        // The mapping holding `at`: the last one starting at or before it.
        let mut i = self
            .maps
            .partition_point(|(s, _)| *s <= at)
            .saturating_sub(1);
        while !bytes.is_empty() {
            let Some((start, m)) = self.maps.get_mut(i) else {
                // Unreachable: callers stay below `cap`.
                debug_assert!(false, "write past the mapped log");
                return;
            };
            let off = (at - *start) as usize;
            let n = bytes.len().min(m.len() - off);
            m.write(off, &bytes[..n]);
            bytes = &bytes[n..];
            at += n as u64;
            i += 1;
        }
    }

    /// Where the file bytes `[from, to)` lie in memory: one `(address,
    /// length)` span per mapping they touch. For [`release_pages`], which
    /// the caller may run without holding this object (the spans stay
    /// mapped as long as it lives: mappings are only added, never dropped,
    /// before it drops).
    pub fn spans(&self, from: u64, to: u64) -> Vec<(usize, usize)> {
        let to = to.min(self.cap);
        self.maps
            .iter()
            .filter_map(|(start, m)| {
                let end = start + m.len() as u64;
                let (a, b) = (from.max(*start), to.min(end));
                if a >= b {
                    return None;
                }
                m.span((a - start) as usize, (b - start) as usize)
            })
            .collect()
    }

    /// Overwrites bytes already in use (the header's durable-length slot).
    pub fn write_at(&mut self, at: u64, bytes: &[u8]) {
        debug_assert!(at + bytes.len() as u64 <= self.end);
        self.copy_in(at, bytes);
    }

    /// The file, to sync it or ask for its write-back without holding
    /// this object (appends go on meanwhile).
    pub fn file(&self) -> &Arc<dyn MappableFile> {
        &self.file
    }

    /// Makes everything written durable.
    #[cfg(test)]
    pub fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    /// Tests: preallocation past `len` bytes fails with `ENOSPC`.
    #[cfg(test)]
    pub fn fail_past(&mut self, len: Option<u64>) {
        self.fail_past = len;
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    use std::path::Path;

    /// The real file at `path`, opened for mapped appends.
    pub(in crate::wal) fn real(path: &Path) -> Arc<dyn MappableFile> {
        let dir = path.parent().unwrap();
        let st = flexspace::FileStorage::open(dir, true).unwrap();
        let name = path.file_name().unwrap().to_str().unwrap();
        flexspace::Storage::open_mappable(&st, name)
            .unwrap()
            .unwrap()
    }

    fn allocated(path: &Path) -> u64 {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(path).unwrap().blocks() * 512
    }

    #[test]
    fn appends_land_in_the_file_and_grow_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        std::fs::write(&path, b"HEAD").unwrap();
        let mut log = MappedLog::open(real(&path), 4, 16).unwrap();
        log.append(b"hello").unwrap();
        let big = vec![7u8; (STEP as usize) * 2 + 12345];
        log.append(&big).unwrap();
        log.write_at(0, b"head");
        log.sync().unwrap();
        assert_eq!(log.end(), 4 + 5 + big.len() as u64);
        let bytes = std::fs::read(&path).unwrap();
        assert!(bytes.len() as u64 >= log.end());
        assert_eq!(&bytes[..9], b"headhello");
        assert_eq!(&bytes[9..9 + big.len()], &big[..]);
        assert!(bytes[log.end() as usize..].iter().all(|&b| b == 0));
        // One step beyond what the log needs, at most.
        assert!(log.capacity() < log.end() + STEP);
    }

    #[test]
    fn released_pages_keep_their_bytes_and_take_writes_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        std::fs::write(&path, b"HEAD").unwrap();
        // Small steps, so that a released stretch spans several mappings.
        let mut log = MappedLog::open_with_step(real(&path), 4, ALIGN, ALIGN).unwrap();
        let bytes: Vec<u8> = (0..3 * ALIGN as usize + 777)
            .map(|i| (i % 253) as u8)
            .collect();
        log.append(&bytes).unwrap();
        let stop = crate::wal::writeback::stop_at(log.end());
        let spans = log.spans(0, stop);
        assert!(spans.len() >= 3, "{spans:?}");
        assert_eq!(spans.iter().map(|s| s.1 as u64).sum::<u64>(), stop);
        // Nothing outside the log's mappings, even when asked past them.
        assert_eq!(
            log.spans(0, u64::MAX)
                .iter()
                .map(|s| s.1 as u64)
                .sum::<u64>(),
            log.cap
        );
        assert!(log.spans(log.cap, u64::MAX).is_empty());
        for span in spans {
            // SAFETY: the span comes from `log`, alive for the whole test.
            unsafe { release_pages(span) }.unwrap();
        }
        // The file reads what was written (the pages stay in the page
        // cache, not dropped as zeros)...
        let seen = std::fs::read(&path).unwrap();
        assert_eq!(&seen[4..4 + bytes.len()], &bytes[..]);
        // ...takes writes on released pages and after them, and the file
        // holds all of it.
        log.write_at(0, b"head");
        log.append(b"tail").unwrap();
        log.sync().unwrap();
        let back = std::fs::read(&path).unwrap();
        assert_eq!(&back[..4], b"head");
        assert_eq!(&back[4..4 + bytes.len()], &bytes[..]);
        assert_eq!(&back[4 + bytes.len()..8 + bytes.len()], b"tail");
    }

    #[test]
    fn the_first_mapping_is_bounded_and_growth_goes_by_steps() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        std::fs::write(&path, b"HEAD").unwrap();
        // A 1 GiB MemTable's log starts at FIRST_MAX, not 1 GiB.
        let log = MappedLog::open(real(&path), 4, 1 << 30).unwrap();
        assert_eq!(log.capacity(), FIRST_MAX);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), FIRST_MAX);
        drop(log);

        // Small steps: records straddle mappings, and each growth adds
        // exactly one step.
        std::fs::write(&path, b"HEAD").unwrap();
        let mut log = MappedLog::open_with_step(real(&path), 4, 1, 1).unwrap();
        let a = align();
        assert_eq!(log.capacity(), a);
        let mut want = b"HEAD".to_vec();
        let mut i = 0u32;
        while log.maps.len() < 5 {
            let rec: Vec<u8> = (0..1000 + (i % 77)).map(|j| (i + j) as u8).collect();
            log.append(&rec).unwrap();
            want.extend_from_slice(&rec);
            assert_eq!(log.capacity(), a * log.maps.len() as u64);
            assert!(log.end() <= log.capacity());
            i += 1;
        }
        // A record larger than a step takes several steps at once.
        let rec = vec![0xA5u8; (2 * a + 17) as usize];
        log.append(&rec).unwrap();
        want.extend_from_slice(&rec);
        for (k, (start, m)) in log.maps.iter().enumerate() {
            assert_eq!(*start, k as u64 * a);
            assert_eq!(m.len() as u64, a);
        }
        // The slot lies in the first mapping; rewriting it there works.
        log.write_at(1, b"EA");
        want[1..3].copy_from_slice(b"EA");
        log.sync().unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len() as u64, log.capacity());
        assert!(allocated(&path) >= log.capacity());
        assert_eq!(&bytes[..want.len()], &want[..]);
        assert!(bytes[want.len()..].iter().all(|&b| b == 0));
    }

    #[test]
    fn a_failed_preallocation_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        std::fs::write(&path, b"HEAD").unwrap();
        let mut log = MappedLog::open_with_step(real(&path), 4, 1, 1).unwrap();
        let a = align();
        log.fail_past(Some(2 * a));
        let rec = vec![3u8; 1000];
        let mut n = 0;
        let err = loop {
            match log.append(&rec) {
                Ok(()) => n += 1,
                Err(e) => break e,
            }
        };
        assert_eq!(err.raw_os_error(), Some(libc::ENOSPC));
        assert_eq!(log.end(), 4 + n * 1000);
        assert_eq!(log.capacity(), 2 * a);
        // Space is back: the same append succeeds and nothing was lost.
        log.fail_past(None);
        log.append(&rec).unwrap();
        log.sync().unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(log.end(), 4 + (n + 1) * 1000);
        assert!(bytes[4..log.end() as usize].iter().all(|&b| b == 3));
        assert!(bytes[log.end() as usize..].iter().all(|&b| b == 0));
    }
}
