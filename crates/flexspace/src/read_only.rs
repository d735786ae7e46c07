//! Opening a space read-only while a writer in another process may be
//! changing it: an optimistic load, validated, retried.
//!
//! The reader first registers in the reader registry (`registry.rs`),
//! pinning everything; then it loads the newest checkpoint and the log's
//! committed batches with no lock (`open::recover` in its read-only mode,
//! which changes nothing), and then re-reads the tree's header slots: the
//! load holds when the checkpoint it used is still the newest, since a
//! checkpoint writes its header before it restarts the log and before the
//! next one reuses a page the loaded version references. Any failure of a
//! load (a torn page, a log read while it was restarted, an entry read
//! half-written) is retried, up to [`TRIES`] times with a short backoff,
//! then reported as [`Error::Unstable`] with the last failure. Once loaded,
//! the reader pins the commit point it loaded.
//!
//! Invariants:
//! - The registration precedes every read of the space's files, and the
//!   pin written is the commit point of the state kept (see `registry.rs`
//!   for why the writer then never reuses a segment this state maps).
//! - Nothing of the storage is changed: the storage is opened read-only
//!   (`FileStorage::open_read_only`) and the space refuses every mutation.

use std::sync::Arc;
use std::time::Duration;

use flextree::FlexTree;

use crate::error::{io, Error, Result};
use crate::log::{self, LogOp};
use crate::open::{self, corrupt, SpaceFiles, DATA, LOG, TREE};
use crate::options::Options;
use crate::registry::{self, CommitPoint, Registration};
use crate::space::FlexSpace;
use crate::storage::{Storage, StorageFile};

/// Loads tried before a read-only open gives up.
pub const TRIES: u32 = 100;

/// The wait before try `n` (from 1): 1 ms doubling, at most 16 ms.
fn backoff(n: u32) -> Duration {
    Duration::from_millis(1 << n.saturating_sub(1).min(4))
}

/// Whether a failed load may succeed when tried again (a writer was
/// changing what it read).
fn retryable(e: &Error) -> bool {
    match e {
        Error::Corrupt { .. } | Error::Io { .. } => true,
        Error::Tree(t) => matches!(t, flextree::Error::Corrupt(_) | flextree::Error::Io(_)),
        _ => false,
    }
}

/// Opens the space on `storage` read-only (see the module documentation).
pub(crate) fn open(storage: Arc<dyn Storage>, options: Options) -> Result<FlexSpace> {
    let registration = match storage.registry_dir() {
        Some(dir) => Some(Registration::register(&dir).map_err(io(registry::DIR))?),
        None => None,
    };
    let mut last = None;
    for attempt in 0..TRIES {
        if attempt > 0 {
            std::thread::sleep(backoff(attempt));
        }
        match load(storage.as_ref(), &options) {
            Ok(o) => {
                if let Some(r) = &registration {
                    r.pin((o.version, o.seq)).map_err(io(registry::DIR))?;
                }
                return FlexSpace::assemble(storage, options, o, registration);
            }
            Err(e) if retryable(&e) => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(Error::Unstable {
        tries: TRIES,
        last: Box::new(last.unwrap_or(Error::Poisoned)),
    })
}

/// One validated load.
fn load(storage: &dyn Storage, options: &Options) -> Result<open::Opened> {
    let has = |n| storage.exists(n).map_err(io(n));
    if !open::exists(storage)? || !has(DATA)? || !has(LOG)? {
        return Err(Error::NotAFlexSpace(Default::default()));
    }
    let o = open::recover(storage, options)?;
    let now = FlexTree::newest_checkpoint(o.files.tree.as_ref())?.map(|c| c.version);
    if now != Some(o.version) {
        return Err(corrupt(
            TREE,
            format!(
                "checkpoint {now:?} was written while version {} was loaded",
                o.version
            ),
        ));
    }
    Ok(o)
}

/// The newest commit point on file and the metadata words as of it,
/// read without loading the tree (validated as a load is; an error may be
/// a writer's concurrent change: try again). `from`: a commit point this
/// reader loaded, its words and where its log entries ended: when the
/// checkpoint is still that one, only the log after it is read (the log
/// only grows between checkpoints).
pub(crate) fn peek(
    files: &SpaceFiles,
    from: Option<(CommitPoint, [u64; 3], u64)>,
) -> Result<(CommitPoint, [u64; 3])> {
    let newest = || -> Result<flextree::Checkpoint> {
        FlexTree::newest_checkpoint(files.tree.as_ref())?
            .ok_or_else(|| corrupt(TREE, "no valid header slot"))
    };
    let cp = newest()?;
    let mut words =
        open::parse_meta(&cp.meta).ok_or_else(|| Error::NotAFlexSpace(Default::default()))?;
    let len = files.log.len().map_err(io(LOG))?;
    let mut header = vec![0u8; log::HEADER.min(len as usize)];
    files.log.read_exact_at(0, &mut header).map_err(io(LOG))?;
    let mut seq = 0;
    if log::parse_header(&header) == Some(cp.version) {
        // Where to start: after what this reader loaded, if it is of this
        // checkpoint and the log still reaches it.
        let (start, base) = match from {
            Some(((v, s), w, end))
                if v == cp.version && end <= len && end >= log::HEADER as u64 =>
            {
                (end, Some((s, w)))
            }
            _ => (log::HEADER as u64, None),
        };
        let n = usize::try_from(len - start).map_err(|_| corrupt(LOG, "log too large"))?;
        let mut bytes = vec![0u8; n];
        files
            .log
            .read_exact_at(start, &mut bytes)
            .map_err(io(LOG))?;
        let r = log::replay(&bytes);
        if let Some(d) = r.damage {
            return Err(corrupt(
                LOG,
                format!("entry at byte {}: {}", start as usize + d.at, d.why),
            ));
        }
        if let Some((s, w)) = base {
            words = w;
            seq = s;
        }
        for op in r.batches.iter().flatten() {
            if let LogOp::Meta { words: w } = op {
                words = *w;
            }
        }
        // (Commit entries carry their own numbers.)
        if r.last_seq > 0 {
            seq = r.last_seq;
        }
    }
    if newest()?.version != cp.version {
        return Err(corrupt(TREE, "a checkpoint was written meanwhile"));
    }
    Ok(((cp.version, seq), words))
}

impl FlexSpace {
    /// Whether the space was opened read-only (`Options::read_only`).
    pub fn is_read_only(&self) -> bool {
        self.s.opts.read_only
    }

    /// The newest commit point on file and the layer above's metadata
    /// words as of it, read without loading anything (for a read-only
    /// reader checking whether what it derived from this state still
    /// holds). An error may be a writer's change in progress: try again.
    pub fn latest_commit(&self) -> Result<((u64, u64), [u64; 3])> {
        let from = self.s.opts.read_only.then(|| {
            let st = self.s.state.read();
            (
                st.commit_id,
                st.user_meta,
                self.s
                    .counters
                    .log_end
                    .load(std::sync::atomic::Ordering::Relaxed),
            )
        });
        peek(&self.s.files, from)
    }

    /// The file of this handle's entry in the reader registry (read-only
    /// spaces on real files).
    pub fn registration_file(&self) -> Option<&std::path::Path> {
        self.s.registration.as_ref().map(|r| r.path())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::fault::FaultStorage;
    use std::io;
    use std::sync::atomic::{AtomicBool, Ordering};

    #[test]
    fn backoff_is_short_and_bounded() {
        assert_eq!(backoff(1), Duration::from_millis(1));
        assert_eq!(backoff(3), Duration::from_millis(4));
        assert_eq!(backoff(99), Duration::from_millis(16));
    }

    /// A storage that, the first time the log's length is asked, runs
    /// `race` (a writer's checkpoint landing between the reader's tree
    /// read and its log read).
    struct Racing {
        inner: Arc<FaultStorage>,
        race: Race,
        raced: Arc<AtomicBool>,
    }

    type Race = Arc<dyn Fn(&FaultStorage) + Send + Sync>;

    struct RacingLog {
        file: Arc<dyn StorageFile>,
        storage: Arc<FaultStorage>,
        race: Race,
        raced: Arc<AtomicBool>,
    }

    impl StorageFile for RacingLog {
        fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
            self.file.read_exact_at(offset, buf)
        }
        fn write_all_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
            self.file.write_all_at(offset, data)
        }
        fn sync(&self) -> io::Result<()> {
            self.file.sync()
        }
        fn len(&self) -> io::Result<u64> {
            if !self.raced.swap(true, Ordering::SeqCst) {
                (self.race)(&self.storage);
            }
            self.file.len()
        }
        fn set_len(&self, len: u64) -> io::Result<()> {
            self.file.set_len(len)
        }
    }

    impl Storage for Racing {
        fn open_file(&self, name: &str, create: bool) -> io::Result<Arc<dyn StorageFile>> {
            let file = self.inner.open_file(name, create)?;
            if name != LOG {
                return Ok(file);
            }
            Ok(Arc::new(RacingLog {
                file,
                storage: self.inner.clone(),
                race: self.race.clone(),
                raced: self.raced.clone(),
            }))
        }
        fn exists(&self, name: &str) -> io::Result<bool> {
            self.inner.exists(name)
        }
        fn remove_file(&self, name: &str) -> io::Result<()> {
            self.inner.remove_file(name)
        }
        fn list_files(&self) -> io::Result<Vec<String>> {
            self.inner.list_files()
        }
        fn rename(&self, from: &str, to: &str) -> io::Result<()> {
            self.inner.rename(from, to)
        }
        fn sync_dir(&self) -> io::Result<()> {
            self.inner.sync_dir()
        }
    }

    fn read_file(st: &FaultStorage, name: &str) -> Vec<u8> {
        let f = st.open_file(name, false).unwrap();
        let mut b = vec![0u8; f.len().unwrap() as usize];
        f.read_exact_at(0, &mut b).unwrap();
        b
    }

    fn write_file(st: &FaultStorage, name: &str, bytes: &[u8]) {
        let f = st.open_file(name, false).unwrap();
        f.set_len(0).unwrap();
        f.write_all_at(0, bytes).unwrap();
    }

    /// The reader reads checkpoint A, then, before it reads the log, the
    /// writer's next checkpoint B lands and its log restart has just cut
    /// the log to nothing: the log alone looks like a torn restart of A,
    /// which would load A without the commits A's log held. The re-read
    /// header slots show B: the load is retried and finds B, whole.
    #[test]
    fn a_load_racing_a_checkpoint_is_retried() {
        let st = Arc::new(FaultStorage::new());
        let w = FlexSpace::open_with_storage(st.clone(), Options::new().create(true)).unwrap();
        w.insert(0, b"aaa").unwrap();
        w.checkpoint().unwrap();
        w.insert(3, b"bbb").unwrap();
        w.sync().unwrap();
        // Checkpoint A plus a log holding "bbb".
        let (tree_a, log_a) = (read_file(&st, TREE), read_file(&st, LOG));
        w.checkpoint().unwrap();
        let tree_b = read_file(&st, TREE);
        drop(w);
        write_file(&st, TREE, &tree_a);
        write_file(&st, LOG, &log_a);
        let racing = Racing {
            inner: st.clone(),
            race: Arc::new(move |s: &FaultStorage| {
                write_file(s, TREE, &tree_b);
                s.open_file(LOG, false).unwrap().set_len(0).unwrap();
            }),
            raced: Arc::new(AtomicBool::new(false)),
        };
        let raced = racing.raced.clone();
        let r =
            FlexSpace::open_with_storage(Arc::new(racing), Options::new().read_only(true)).unwrap();
        assert!(raced.load(Ordering::SeqCst), "the race ran");
        let mut buf = [0u8; 6];
        assert_eq!(r.read(0, &mut buf).unwrap(), 6);
        assert_eq!(&buf, b"aaabbb", "a state older than the files' newest");
        assert_eq!(r.commit_id().1, 0, "checkpoint B itself");
    }
}
