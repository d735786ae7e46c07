//! The reader registry: how read-only handles in other processes pin the
//! data-file segments their copy of the extent index may still reference
//! (LMDB's reader table, as files).
//!
//! A read-only open registers *before* it reads anything of the space: it
//! creates its own file in the directory `readers/` beside the space's
//! files, holds an exclusive `flock` on it for its whole life, and once its
//! state is loaded writes into it the commit point `(tree version,
//! sequence)` it loaded (`docs/FORMAT.md`, "Reader registry"). The writer,
//! after each commit, scans the registry ([`scan`]) and keeps the segments
//! freed at commit points above the oldest pin out of reuse and punching
//! (`segments::table`).
//!
//! Invariants:
//! - A file whose content does not verify (empty: registered, not loaded
//!   yet; torn by a concurrent update) pins `(0, 0)`: everything.
//! - A file whose `flock` the scanner can take belongs to no live reader:
//!   the scanner removes it. A reader that registers re-checks, after
//!   taking its lock, that its path still names its file (the scanner may
//!   have taken the lock of the new, not yet locked file and removed it),
//!   and registers under a new name otherwise. So every live registration
//!   is a file in the directory whose lock is held.
//! - Names are unique (process id, time, counter) and never reused, so a
//!   scanner never removes a live reader's file by name.
//! - A scan that starts after commit `c` is durable sees every reader that
//!   could have loaded a commit point below `c` (such a reader registered
//!   before it read the log, so before `c` was written).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The registry's directory, beside the space's files.
pub const DIR: &str = "readers";
const MAGIC: &[u8; 8] = b"FLEXRDR1";
const VERSION: u32 = 1;
/// Bytes of a registry file's content.
pub const LEN: usize = 36;

/// A commit point: (checkpoint version, commit sequence number).
pub type CommitPoint = (u64, u64);

/// The content of a registry file pinning `at`.
pub fn encode(at: CommitPoint) -> [u8; LEN] {
    let mut b = [0u8; LEN];
    b[0..8].copy_from_slice(MAGIC);
    b[8..12].copy_from_slice(&VERSION.to_le_bytes());
    b[16..24].copy_from_slice(&at.0.to_le_bytes());
    b[24..32].copy_from_slice(&at.1.to_le_bytes());
    let crc = crc32c::crc32c(&b[..32]);
    b[32..36].copy_from_slice(&crc.to_le_bytes());
    b
}

/// The commit point a registry file pins: `(0, 0)` (everything) unless it
/// verifies.
pub fn decode(b: &[u8]) -> CommitPoint {
    if b.len() < LEN
        || &b[0..8] != MAGIC
        || b[8..12] != VERSION.to_le_bytes()
        || b[32..36] != crc32c::crc32c(&b[..32]).to_le_bytes()
    {
        return (0, 0);
    }
    let word = |at: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&b[at..at + 8]);
        u64::from_le_bytes(w)
    };
    (word(16), word(24))
}

/// Takes `file`'s exclusive `flock` without waiting; whether it did.
fn try_lock(file: &File) -> bool {
    // SAFETY: flock on a file descriptor we own; it only takes an
    // advisory lock and cannot touch memory.
    unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
}

/// A name no registration ever had.
fn unique_name() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{}-{nanos:x}-{n}", std::process::id())
}

/// A live reader's registration: its file, locked. Dropping it removes
/// the file and lets go of the lock.
#[derive(Debug)]
pub struct Registration {
    path: PathBuf,
    file: File,
}

impl Registration {
    /// Registers a reader in the registry directory `dir` (created if
    /// missing): its file pins everything until [`Registration::pin`].
    pub fn register(dir: &Path) -> io::Result<Registration> {
        match std::fs::create_dir(dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
        for _ in 0..100 {
            let path = dir.join(unique_name());
            let file = match OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(&path)
            {
                Ok(f) => f,
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            };
            if !try_lock(&file) {
                // A scanner took it for a dead reader's and removes it.
                continue;
            }
            let ours = file.metadata()?;
            match std::fs::metadata(&path) {
                Ok(m) if m.ino() == ours.ino() && m.dev() == ours.dev() => {
                    return Ok(Registration { path, file })
                }
                // Removed by a scanner before the lock was ours.
                _ => continue,
            }
        }
        Err(io::Error::other(
            "could not register in the reader registry (100 tries)",
        ))
    }

    /// Records that this reader's state is commit point `at` (the writer
    /// may reuse what commits up to `at` freed).
    pub fn pin(&self, at: CommitPoint) -> io::Result<()> {
        self.file.write_all_at(&encode(at), 0)
    }

    /// The registration's file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        // The lock goes with the file handle, after the name: a scanner
        // that opened the file before finds it locked and reads a pin that
        // is merely old.
        let _ = std::fs::remove_file(&self.path);
    }
}

/// What a scan of the registry found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Scan {
    /// The oldest commit point a live reader pins (`None`: no reader).
    pub oldest: Option<CommitPoint>,
    /// Live readers.
    pub readers: usize,
    /// Dead readers' files removed.
    pub removed: usize,
}

/// Scans the registry directory `dir` (missing: no reader), removing the
/// files of dead readers. Never waits for a lock.
pub fn scan(dir: &Path) -> io::Result<Scan> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        // (No directory, or a file in its place: no reader could register.)
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
            ) =>
        {
            return Ok(Scan::default())
        }
        Err(e) => return Err(e),
    };
    let mut out = Scan::default();
    for entry in entries {
        let entry = entry?;
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        // Only regular files are readers' (a FIFO would block the open,
        // a symbolic link lead elsewhere); `file_type` follows no link.
        if !entry.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
        let path = entry.path();
        let file = match OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
            .open(&path)
        {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            // A file this process may not read (another user's reader):
            // it pins everything, rather than nothing.
            Err(_) => {
                out.readers += 1;
                out.oldest = Some(decode(&[]));
                continue;
            }
        };
        if !file.metadata()?.is_file() {
            continue;
        }
        if try_lock(&file) {
            // Nobody holds it: a dead reader's (or one not locked yet,
            // which registers again under another name). One that cannot
            // be removed pins nothing: its reader is gone.
            if std::fs::remove_file(&path).is_ok() {
                out.removed += 1;
            }
            continue;
        }
        let mut b = [0u8; LEN];
        let n = read_up_to(&file, &mut b)?;
        let at = decode(&b[..n]);
        out.readers += 1;
        out.oldest = Some(out.oldest.map_or(at, |o: CommitPoint| o.min(at)));
    }
    Ok(out)
}

/// Reads up to `buf.len()` bytes from the start of `file`.
fn read_up_to(file: &File, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match file.read_at(&mut buf[n..], n as u64) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pin_round_trips_and_damage_pins_everything() {
        let b = encode((7, 42));
        assert_eq!(decode(&b), (7, 42));
        let mut torn = b;
        torn[20] ^= 1;
        assert_eq!(decode(&torn), (0, 0));
        assert_eq!(decode(&b[..LEN - 1]), (0, 0));
        assert_eq!(decode(&[]), (0, 0));
    }

    #[test]
    fn live_readers_pin_the_oldest_and_dead_ones_are_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join(DIR);
        assert_eq!(scan(&dir).unwrap(), Scan::default(), "no directory");
        let a = Registration::register(&dir).unwrap();
        // Registered, not loaded yet: pins everything.
        assert_eq!(scan(&dir).unwrap().oldest, Some((0, 0)));
        a.pin((3, 9)).unwrap();
        let b = Registration::register(&dir).unwrap();
        b.pin((4, 1)).unwrap();
        let s = scan(&dir).unwrap();
        assert_eq!((s.oldest, s.readers, s.removed), (Some((3, 9)), 2, 0));
        // A dead reader: its file is there, nobody holds its lock.
        let dead = dir.join("12345-dead-0");
        std::fs::write(&dead, encode((1, 1))).unwrap();
        let s = scan(&dir).unwrap();
        assert_eq!((s.oldest, s.readers, s.removed), (Some((3, 9)), 2, 1));
        assert!(!dead.exists(), "the dead reader's file is reclaimed");
        let a_path = a.path().to_path_buf();
        drop(a);
        assert!(!a_path.exists());
        assert_eq!(scan(&dir).unwrap().oldest, Some((4, 1)));
        drop(b);
        assert_eq!(scan(&dir).unwrap().oldest, None);
    }

    /// A reader whose file a scanner removed before the reader locked it
    /// (the race of registration) is never left unregistered: it sees its
    /// path gone and registers anew.
    #[test]
    fn a_registration_survives_a_scan_racing_it() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join(DIR);
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let scanner = {
            let (dir, stop) = (dir.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let _ = scan(&dir);
                }
            })
        };
        for _ in 0..200 {
            let r = Registration::register(&dir).unwrap();
            // Live and locked: every scan from now on counts it.
            for _ in 0..3 {
                assert!(r.path().exists());
                assert!(scan(&dir).unwrap().readers >= 1);
            }
        }
        stop.store(true, Ordering::Relaxed);
        scanner.join().unwrap();
    }
}
