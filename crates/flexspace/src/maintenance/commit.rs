//! Commits and checkpoints (§4.2, the barriers of Figure 9), done with the
//! space's write lock held only to take a snapshot and to publish.
//!
//! A commit:
//! 1. (write lock) takes the log buffer, the emptied segments, the open
//!    segment's buffer and fill, and the number of sealed segments: a cut
//!    between two mutations;
//! 2. (no lock) waits for the sealed segments' background writes, writes
//!    the open segment's new bytes, syncs the data file, appends the batch
//!    and its commit entry to the log, syncs the log;
//! 3. (write lock) hands the emptied segments to the grace period and
//!    publishes the commit id.
//!
//! Mutations run during step 2: their data lands past the flushed range
//! (or in other segments, never ones the snapshot's state references), and
//! their log entries go to the next commit. Commits are serialized by
//! `maint`.
//!
//! A checkpoint commits, then holds the gate (mutations wait, readers do
//! not) to commit what slipped in and write the tree copy-on-write under
//! the read lock; then, with only `maint` held, restarts the log under the
//! new version (truncate and sync before writing the header, so old
//! entries are never read under the new version; a restart a full device
//! refused is left to the next commit or checkpoint, `restart_pending`),
//! and has a thread give the tree file's freed pages back (cuts its free
//! tail, punches its free blocks; the figures go out as a debug event,
//! target `flexspace::checkpoint`). At most one such thread runs: the next
//! checkpoint, `close` and an explicit `checkpoint()` join it.

use std::sync::atomic::Ordering;

use crate::error::{io, storage_full, Error, Result};
use crate::log;
use crate::open::{meta, DATA, LOG};
use crate::segments::writers::flush;
use crate::space::{LogPosition, SpaceInner};
use crate::storage::StorageFile;

/// Target of the checkpoint's tracing event.
const TRACE_TARGET: &str = "flexspace::checkpoint";

/// What a checkpoint wrote and gave back, as a debug event: how many node
/// pages changed since the last one out of the tree's, and the tree file's
/// pages, holes and time.
fn trace_checkpoint(r: &flextree::CheckpointReport, g: &flextree::GiveBack) {
    tracing::debug!(
        target: TRACE_TARGET,
        version = r.version,
        pages_written = r.pages_written,
        leaves_written = r.leaves_written,
        leaves_moved = r.leaves_moved,
        node_pages = r.node_pages,
        file_pages = r.file_pages,
        write_us = r.write_time.as_micros() as u64,
        punched_bytes = g.punched_bytes,
        truncated_bytes = g.truncated_bytes,
        give_back_us = g.time.as_micros() as u64,
        give_back_error = g.error.as_ref().map(|e| e.to_string()),
        "checkpoint"
    );
}

/// How often [`SpaceInner::refresh_reader_pin`] scans the registry at
/// most, when not forced.
const PIN_REFRESH: std::time::Duration = std::time::Duration::from_millis(50);

/// How a commit's I/O failed.
enum Failed {
    /// A full device refused a write: nothing is lost, the commit can be
    /// made again (the space stays usable).
    Refused(Error),
    /// Anything else: the space is poisoned.
    Fatal(Error),
}

impl SpaceInner {
    pub(crate) fn sync(&self) -> Result<()> {
        self.forget_refusal();
        self.check_usable()?;
        let mut m = self.maint.lock();
        self.commit_locked(&mut m)?;
        if self.opts.auto_maintenance {
            self.checkpoint_if_due(&mut m)?;
        }
        self.punch_soon();
        Ok(())
    }

    pub(crate) fn checkpoint(&self) -> Result<()> {
        self.forget_refusal();
        self.check_usable()?;
        let mut m = self.maint.lock();
        self.checkpoint_locked(&mut m)?;
        // An explicit checkpoint returns with the tree file's free pages
        // given back (the ones maintenance runs leave that to the thread).
        self.join_give_back();
        Ok(())
    }

    /// Drops a full device's refusal that background maintenance left for
    /// the next caller: a sync or checkpoint makes the refused commit again
    /// and reports its own outcome (a device freed meanwhile is not
    /// reported full). Errors that poisoned the space stay.
    fn forget_refusal(&self) {
        let mut slot = self.bg_error.lock();
        if slot.as_ref().is_some_and(Error::is_storage_full) {
            *slot = None;
        }
    }

    /// The commit automatic maintenance runs after a mutation.
    pub(crate) fn commit_auto(&self) -> Result<()> {
        let mut m = self.maint.lock();
        self.commit_locked(&mut m)?;
        self.checkpoint_if_due(&mut m)
    }

    pub(crate) fn checkpoint_if_due(&self, m: &mut LogPosition) -> Result<()> {
        if m.log_end - log::HEADER as u64 > self.opts.checkpoint_log_bytes {
            self.checkpoint_locked(m)?;
        }
        Ok(())
    }

    /// One commit (see the module documentation); nothing to do when no
    /// operation was logged since the last one.
    pub(crate) fn commit_locked(&self, m: &mut LogPosition) -> Result<()> {
        let snap = {
            let mut st = self.state.write();
            if st.poisoned {
                return Err(self.poisoned_error());
            }
            if !st.dirty || st.closed {
                return Ok(());
            }
            st.dirty = false;
            st.reap();
            (
                st.log_buf.take(),
                st.seg.take_pending(),
                st.open_buffer(),
                st.seal_seq,
            )
        };
        let (body, emptied, open, sealed) = snap;
        // The batches a full device refused first, each a commit of its own.
        let mut bodies = std::mem::take(&mut m.unwritten);
        bodies.push(body);
        let r = self.write_commit(m, &bodies, open.as_ref(), sealed);
        let commits = bodies.len() as u64;
        // What readers of other processes hold, scanned once this commit
        // is durable and before the state lock (I/O: `readdir`, nothing
        // more when there is no reader).
        let pin = match &r {
            Ok(_) => self.scan_readers((m.version, m.seq + commits)),
            Err(_) => None,
        };
        let mut st = self.state.write();
        match r {
            Ok(written) => {
                for b in bodies {
                    st.log_buf.recycle(b);
                }
                m.log_end += written;
                m.seq += commits;
                self.counters.log_end.store(m.log_end, Ordering::Relaxed);
                self.counters.commits.fetch_add(1, Ordering::Relaxed);
                st.seg.quarantine(&emptied, (m.version, m.seq));
                if let Some(pin) = pin {
                    st.seg.set_pin(pin);
                }
                st.release();
                st.commit_id = (m.version, m.seq);
                Ok(())
            }
            Err(Failed::Refused(e)) => {
                // Nothing of it counts: the log's valid end, the sequence
                // number and the emptied segments are as before, and the
                // next commit writes the same batches again (over whatever
                // part of them reached the file), then its own.
                st.dirty = true;
                st.seg.restore_pending(emptied);
                m.unwritten = bodies;
                Err(e)
            }
            Err(Failed::Fatal(e)) => {
                for b in bodies {
                    st.log_buf.recycle(b);
                }
                self.poison(&mut st, &e);
                Err(e)
            }
        }
    }

    /// The I/O of a commit of `bodies` (see the module documentation):
    /// returns the log bytes written. A full device's refusal of a write
    /// (or of the log's sync: the log is written again whole from
    /// `log_end`) is `Refused`; any other error, and any failed sync of the
    /// data file (the kernel may have dropped the pages it could not
    /// write, which a retry would not write again), is `Fatal`.
    fn write_commit(
        &self,
        m: &mut LogPosition,
        bodies: &[log::buffer::TakenLog],
        open: Option<&(u32, std::sync::Arc<crate::segments::segbuf::SegBuf>, usize)>,
        sealed: u64,
    ) -> std::result::Result<u64, Failed> {
        let write = |e: std::io::Error, file: &str| {
            let refused = storage_full(&e);
            let e = io(file)(e);
            if refused {
                Failed::Refused(e)
            } else {
                Failed::Fatal(e)
            }
        };
        self.writer
            .wait_sealed(sealed)
            .map_err(|e| write(e, DATA))?;
        if let Some((s, buf, fill)) = open {
            flush(self.files.data.as_ref(), *s, buf, *fill).map_err(|e| write(e, DATA))?;
        }
        self.files
            .data
            .sync()
            .map_err(|e| Failed::Fatal(io(DATA)(e)))?;
        if m.restart_pending {
            // A checkpoint's log restart a full device refused: done now,
            // before any batch of the new version is appended.
            match self.restart_log(m.version) {
                Ok(()) => m.restart_pending = false,
                Err(e) if e.is_storage_full() => return Err(Failed::Refused(e)),
                Err(e) => return Err(Failed::Fatal(e)),
            }
        }
        let log_file = self.files.log.as_ref();
        let mut at = m.log_end;
        for (i, body) in bodies.iter().enumerate() {
            for chunk in &body.chunks {
                log_file
                    .write_all_at(at, chunk)
                    .map_err(|e| write(e, LOG))?;
                at += chunk.len() as u64;
            }
            let seq = m.seq + 1 + i as u64;
            let commit = log::commit_entry(seq, body.entries(), body.crc());
            log_file
                .write_all_at(at, &commit)
                .map_err(|e| write(e, LOG))?;
            at += commit.len() as u64;
        }
        log_file.sync().map_err(|e| write(e, LOG))?;
        Ok(at - m.log_end)
    }

    /// Scans the reader registry (if this space keeps one) as of the
    /// durable commit point `at`; `None` when there is none or the scan
    /// failed (the last pin stays: it only ever holds more).
    pub(crate) fn scan_readers(&self, at: (u64, u64)) -> Option<crate::segments::ReaderPin> {
        let dir = self.registry.as_ref()?;
        let scan = match crate::registry::scan(dir) {
            Ok(scan) => scan,
            Err(e) => {
                // Segments freed since stay held until a scan succeeds.
                tracing::warn!(dir = %dir.display(), error = %e, "cannot scan the reader registry");
                return None;
            }
        };
        Some(crate::segments::ReaderPin::Scanned {
            at,
            oldest: scan.oldest,
        })
    }

    /// Scans the reader registry as of the current commit point and lets
    /// go of the held segments the readers no longer need; unless `force`,
    /// at most every [`PIN_REFRESH`] and only when segments are held.
    pub(crate) fn refresh_reader_pin(&self, force: bool) {
        if self.registry.is_none() {
            return;
        }
        let at = {
            let st = self.state.read();
            if st.seg.held_count() == 0 {
                return;
            }
            st.commit_id
        };
        {
            let mut last = self.pin_scanned.lock();
            let now = std::time::Instant::now();
            if !force && last.is_some_and(|t| now.duration_since(t) < PIN_REFRESH) {
                return;
            }
            *last = Some(now);
        }
        if let Some(pin) = self.scan_readers(at) {
            {
                let mut st = self.state.write();
                st.seg.set_pin(pin);
                st.release();
            }
            self.punch_soon();
        }
    }

    /// Commit, checkpoint, log restart (see the module documentation).
    pub(crate) fn checkpoint_locked(&self, m: &mut LogPosition) -> Result<()> {
        self.commit_locked(m)?;
        let report = {
            let _gate = self.gate.lock();
            // What mutations did since the commit above: commit it too, so
            // the checkpoint holds exactly the last commit.
            self.commit_locked(m)?;
            if m.seq == 0 {
                // Nothing changed since the last checkpoint (whose log
                // restart may wait still).
                if m.restart_pending {
                    self.restart_log(m.version)?;
                    m.restart_pending = false;
                }
                return Ok(());
            }
            let st = self.state.read();
            let r = st
                .tree
                .checkpoint_report(self.files.tree.as_ref(), &meta(&st.user_meta));
            drop(st);
            match r {
                Ok(report) => report,
                Err(e) => {
                    let e = crate::error::tree(e);
                    // A checkpoint adopts nothing until its header is
                    // synced, and one made again writes every page this
                    // one did: a full device poisons nothing.
                    if !e.is_storage_full() {
                        self.poison(&mut self.state.write(), &e);
                    }
                    return Err(e);
                }
            }
        };
        let version = report.version;
        let r = self.restart_log(version);
        let mut st = self.state.write();
        let refused = match r {
            Ok(()) => None,
            // The tree holds the new version: the log restarts under it
            // before the next commit's batches (`restart_pending`), and a
            // crash meanwhile finds a log of an older version or a torn
            // restart, both recovered.
            Err(e) if e.is_storage_full() => Some(e),
            Err(e) => {
                self.poison(&mut st, &e);
                return Err(e);
            }
        };
        m.restart_pending = refused.is_some();
        m.log_end = log::HEADER as u64;
        m.seq = 0;
        m.version = version;
        self.counters.log_end.store(m.log_end, Ordering::Relaxed);
        self.counters.checkpoints.fetch_add(1, Ordering::Relaxed);
        st.commit_id = (version, 0);
        drop(st);
        self.give_back_tree_pages(report);
        refused.map_or(Ok(()), Err)
    }

    /// Restarts the log under checkpoint `version`: truncate and sync it
    /// before its new header is written (and synced), so old entries are
    /// never read under the new version.
    fn restart_log(&self, version: u64) -> Result<()> {
        let l = &self.files.log;
        l.set_len(0).map_err(io(LOG))?;
        l.sync().map_err(io(LOG))?;
        l.write_all_at(0, &log::header(version)).map_err(io(LOG))?;
        l.sync().map_err(io(LOG))
    }

    /// Punches and cuts the tree file's pages the checkpoint of `report`
    /// left free, on a thread of its own: at 10 M pairs that is 0.45–0.49 s
    /// of `fallocate`, which held up the committer (and so the writers)
    /// when it ran here under `maint`. Safe whenever it runs: the next
    /// checkpoint gives back whatever is still pending, under the handle's
    /// lock, before it takes a free page. A failure (or a thread that
    /// cannot be started) only leaves blocks allocated until then.
    fn give_back_tree_pages(&self, report: flextree::CheckpointReport) {
        let mut slot = self.give_back.lock();
        if let Some(previous) = slot.take() {
            let _ = previous.join();
        }
        let tree = self.files.tree.clone();
        *slot = std::thread::Builder::new()
            .name("flexspace-give-back".into())
            .spawn(move || {
                let given = report.free_pages.give_back(tree.as_ref());
                trace_checkpoint(&report, &given);
            })
            .ok();
    }

    /// Waits for the tree pages' give-back of the last checkpoint.
    fn join_give_back(&self) {
        if let Some(h) = self.give_back.lock().take() {
            let _ = h.join();
        }
    }

    /// Commit, checkpoint if anything changed since the last one, and mark
    /// the space closed.
    pub(crate) fn close_inner(&self) -> Result<()> {
        if self.state.read().closed {
            return Ok(());
        }
        if self.opts.read_only {
            // Nothing to write: a read-only space only lets go.
            self.state.write().closed = true;
            return Ok(());
        }
        self.check_usable()?;
        {
            let mut m = self.maint.lock();
            self.checkpoint_locked(&mut m)?;
            self.join_give_back();
            let sealed = self.state.read().seal_seq;
            self.writer.wait_sealed(sealed).map_err(io(DATA))?;
            // Under `maint`: background maintenance after this sees it.
            self.state.write().closed = true;
        }
        // Stops at its next segment: the space is closed.
        self.join_punch_thread();
        self.bg.stop();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use crate::{FaultStorage, FlexSpace, Options};

    fn content(space: &FlexSpace) -> Vec<u8> {
        let mut buf = vec![0u8; space.len() as usize];
        let n = space.read(0, &mut buf).unwrap();
        assert_eq!(n, buf.len());
        buf
    }

    /// Background maintenance's commit refused by a full device leaves
    /// its error for the next caller; once the device is freed, a sync
    /// succeeds (it commits again) instead of reporting the stale refusal.
    #[test]
    fn a_sync_once_the_device_is_freed_ignores_a_stale_refusal() {
        let storage = Arc::new(FaultStorage::new());
        let opts = Options::new().create(true).commit_log_bytes(1024);
        let space = FlexSpace::open_with_storage(storage.clone(), opts.clone()).unwrap();
        let mut model = vec![1u8; 100];
        space.insert(0, &model).unwrap();
        space.sync().unwrap();
        storage.fill_device(0);
        let deadline = Instant::now() + Duration::from_secs(20);
        let stale = |s: &FlexSpace| {
            s.s.bg_error
                .lock()
                .as_ref()
                .is_some_and(|e| e.is_storage_full())
        };
        while !stale(&space) {
            assert!(
                Instant::now() < deadline,
                "background maintenance never refused"
            );
            let at = model.len() as u64 / 2;
            match space.insert(at, b"abcdefgh") {
                Ok(()) => {
                    let at = at as usize;
                    model.splice(at..at, *b"abcdefgh");
                }
                Err(e) if e.is_storage_full() => {}
                Err(e) => panic!("insert on a full device: {e}"),
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(content(&space), model);
        storage.free_device();
        space.sync().unwrap();
        assert_eq!(content(&space), model);
        drop(space);
        let space = FlexSpace::open_with_storage(storage, opts).unwrap();
        assert_eq!(content(&space), model);
    }
}
