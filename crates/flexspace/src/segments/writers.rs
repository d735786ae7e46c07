//! Background writers of sealed segments, and the one routine that writes a
//! segment buffer's bytes to the data file.
//!
//! Invariants:
//! - Every write of a buffer's bytes to the data file goes through
//!   [`flush`], which holds the buffer's `flushed` lock: writes of one
//!   segment never overlap in time, and each starts at the aligned block
//!   holding the first byte not yet written (rewriting that block's
//!   written prefix unchanged) and ends at an aligned block boundary
//!   (zero-padded past the bytes asked for; padding is never referenced).
//! - A sealed segment is *in flight* from [`SegmentWriters::submit`] until its write
//!   finished (or failed); [`SegmentWriters::wait_sealed`] returns only when no
//!   segment sealed at or before the given sequence number is in flight.
//! - A failed write is remembered for good: every later wait reports it, and
//!   the failed segment's buffer is never handed back for reaping, so reads
//!   keep being served from memory. Except a write a full device refused
//!   (ENOSPC, EDQUOT): its job waits in `retry`, its buffer still serving
//!   reads, and the next [`SegmentWriters::wait_sealed`] writes it again
//!   (reporting the device full while it still fails). So a commit, which
//!   waits for every segment sealed before it, succeeds only once every
//!   such segment is in the file: a segment is never freed (and reused)
//!   while a stale write of it waits.
//! - Worker threads start on demand (at most `threads`) and exit after a
//!   short idle time, so a space that is leaked (never closed) leaves no
//!   thread behind for long.

use std::collections::{BTreeSet, VecDeque};
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use flextree::DIRECT_ALIGN;
use parking_lot::{Condvar, Mutex};

use crate::error::storage_full;
use crate::options::SEGMENT_SIZE;
use crate::segments::segbuf::SegBuf;
use crate::storage::aligned::AlignedBuf;
use crate::storage::StorageFile;

/// How long an idle worker waits for work before it exits.
const IDLE: Duration = Duration::from_secs(2);

/// Writes `buf`'s bytes `..end` of segment `seg` that the file does not hold
/// yet (see the module invariants).
pub fn flush(file: &dyn StorageFile, seg: u32, buf: &SegBuf, end: usize) -> io::Result<()> {
    let mut flushed = buf.flushed();
    if *flushed >= end {
        return Ok(());
    }
    let a = DIRECT_ALIGN;
    let start = *flushed / a * a;
    let full_end = end / a * a;
    let bytes = buf
        .prefix(end)
        .ok_or_else(|| io::Error::other("segment buffer holds fewer bytes than asked to flush"))?;
    let base = u64::from(seg) * SEGMENT_SIZE;
    if full_end > start {
        file.write_direct_at(base + start as u64, &bytes[start..full_end])?;
    }
    if end > full_end {
        let mut tail = AlignedBuf::zeroed(a);
        tail.as_bytes_mut()[..end - full_end].copy_from_slice(&bytes[full_end..end]);
        file.write_direct_at(base + full_end as u64, tail.as_bytes())?;
    }
    *flushed = end;
    Ok(())
}

struct Job {
    seg: u32,
    buf: Arc<SegBuf>,
    seq: u64,
}

/// What failed, kept so that every later caller can be told.
#[derive(Clone)]
struct Failure {
    code: Option<i32>,
    kind: io::ErrorKind,
    msg: String,
}

impl Failure {
    fn to_error(&self) -> io::Error {
        match self.code {
            Some(c) => io::Error::from_raw_os_error(c),
            None => io::Error::new(self.kind, self.msg.clone()),
        }
    }
}

#[derive(Default)]
struct Queue {
    jobs: VecDeque<Job>,
    /// Sequence numbers of sealed segments not yet written.
    inflight: BTreeSet<u64>,
    /// Written segments, for the owner to stop serving from memory.
    finished: Vec<(u32, Arc<SegBuf>)>,
    failure: Option<Failure>,
    /// Segments whose write a full device refused, oldest first, and the
    /// last such refusal (see the module invariants).
    retry: Vec<Job>,
    full: Option<Failure>,
    threads: usize,
    idle: usize,
}

struct WritersInner {
    file: Arc<dyn StorageFile>,
    q: Mutex<Queue>,
    work: Condvar,
    done: Condvar,
    max_threads: usize,
    inflight: AtomicUsize,
    /// Mirror of `Queue::threads` for a lock-free check.
    threads: AtomicUsize,
}

/// Handle to the segment writers of one space.
pub struct SegmentWriters {
    shared: Arc<WritersInner>,
}

impl SegmentWriters {
    /// Writers for `file` with at most `threads` threads.
    pub fn new(file: Arc<dyn StorageFile>, threads: usize) -> SegmentWriters {
        SegmentWriters {
            shared: Arc::new(WritersInner {
                file,
                q: Mutex::new(Queue::default()),
                work: Condvar::new(),
                done: Condvar::new(),
                max_threads: threads.max(1),
                inflight: AtomicUsize::new(0),
                threads: AtomicUsize::new(0),
            }),
        }
    }

    /// Queues the sealed segment `seg` (sealed as number `seq`).
    pub fn submit(&self, seg: u32, buf: Arc<SegBuf>, seq: u64) {
        let sh = &self.shared;
        let mut q = sh.q.lock();
        q.inflight.insert(seq);
        sh.inflight.fetch_add(1, Ordering::Relaxed);
        q.jobs.push_back(Job { seg, buf, seq });
        // Threads are normally started by `prestart`, outside the space's
        // lock; only when none runs is one started here.
        if q.threads == 0 && !WritersInner::spawn(sh, &mut q) {
            // No thread to hand it to: write it here.
            drop(q);
            sh.work_inline();
            return;
        }
        sh.work.notify_one();
    }

    /// Starts the worker threads that are not running (call with no lock of
    /// the space held: starting a thread takes tens of microseconds).
    pub fn prestart(&self) {
        let sh = &self.shared;
        if sh.threads.load(Ordering::Relaxed) >= sh.max_threads {
            return;
        }
        let mut q = sh.q.lock();
        while q.threads < sh.max_threads {
            if !WritersInner::spawn(sh, &mut q) {
                break;
            }
        }
    }

    /// Segments in flight.
    pub fn inflight(&self) -> usize {
        self.shared.inflight.load(Ordering::Relaxed)
    }

    /// Waits until fewer than `max` segments are in flight.
    pub fn wait_below(&self, max: usize) {
        let sh = &self.shared;
        if sh.inflight.load(Ordering::Relaxed) < max {
            return;
        }
        let mut q = sh.q.lock();
        while q.inflight.len() >= max && q.failure.is_none() {
            sh.done.wait(&mut q);
        }
    }

    /// Waits until every segment sealed as number `upto` or earlier is
    /// written, first writing again (in the calling thread) those a full
    /// device refused; reports a failed write (this one or an earlier one),
    /// or the device still full.
    pub fn wait_sealed(&self, upto: u64) -> io::Result<()> {
        let sh = &self.shared;
        let retry = {
            let mut q = sh.q.lock();
            let retry = std::mem::take(&mut q.retry);
            // In flight again while written: a concurrent wait waits.
            for job in &retry {
                q.inflight.insert(job.seq);
                sh.inflight.fetch_add(1, Ordering::Relaxed);
            }
            retry
        };
        for job in retry {
            let r = flush(sh.file.as_ref(), job.seg, &job.buf, SEGMENT_SIZE as usize);
            let mut q = sh.q.lock();
            sh.finish(&mut q, job, r);
        }
        let mut q = sh.q.lock();
        while q.inflight.first().is_some_and(|&s| s <= upto) {
            sh.done.wait(&mut q);
        }
        if let Some(f) = &q.failure {
            return Err(f.to_error());
        }
        match (&q.full, q.retry.iter().any(|j| j.seq <= upto)) {
            (Some(f), true) => Err(f.to_error()),
            _ => Ok(()),
        }
    }

    /// Segments whose write a full device refused and that wait to be
    /// written again.
    #[cfg(test)]
    pub fn refused(&self) -> usize {
        self.shared.q.lock().retry.len()
    }

    /// Waits until no segment is in flight (failed writes count as done).
    pub fn wait_idle(&self) {
        let sh = &self.shared;
        let mut q = sh.q.lock();
        while !q.inflight.is_empty() {
            sh.done.wait(&mut q);
        }
    }

    /// A failed write, if any happened.
    pub fn failure(&self) -> Option<io::Error> {
        self.shared.q.lock().failure.as_ref().map(Failure::to_error)
    }

    /// Takes the segments written since the last call.
    pub fn take_finished(&self) -> Vec<(u32, Arc<SegBuf>)> {
        std::mem::take(&mut self.shared.q.lock().finished)
    }
}

impl WritersInner {
    /// Starts one worker; false when the system refuses a thread.
    fn spawn(this: &Arc<Self>, q: &mut Queue) -> bool {
        let worker = this.clone();
        let spawned = std::thread::Builder::new()
            .name("flexspace-seg".into())
            .spawn(move || worker.run());
        if spawned.is_ok() {
            q.threads += 1;
            this.threads.store(q.threads, Ordering::Relaxed);
        }
        spawned.is_ok()
    }

    fn run(self: Arc<Self>) {
        let mut q = self.q.lock();
        loop {
            if let Some(job) = q.jobs.pop_front() {
                drop(q);
                let r = flush(self.file.as_ref(), job.seg, &job.buf, SEGMENT_SIZE as usize);
                q = self.q.lock();
                self.finish(&mut q, job, r);
                continue;
            }
            q.idle += 1;
            let timed_out = self.work.wait_for(&mut q, IDLE).timed_out();
            q.idle -= 1;
            if timed_out && q.jobs.is_empty() {
                q.threads -= 1;
                self.threads.store(q.threads, Ordering::Relaxed);
                return;
            }
        }
    }

    /// Writes every queued job in the calling thread.
    fn work_inline(&self) {
        loop {
            let mut q = self.q.lock();
            let Some(job) = q.jobs.pop_front() else {
                return;
            };
            drop(q);
            let r = flush(self.file.as_ref(), job.seg, &job.buf, SEGMENT_SIZE as usize);
            q = self.q.lock();
            self.finish(&mut q, job, r);
        }
    }

    fn finish(&self, q: &mut Queue, job: Job, r: io::Result<()>) {
        q.inflight.remove(&job.seq);
        self.inflight.fetch_sub(1, Ordering::Relaxed);
        match r {
            Ok(()) => q.finished.push((job.seg, job.buf)),
            Err(e) if storage_full(&e) => {
                q.full = Some(Failure {
                    code: e.raw_os_error(),
                    kind: e.kind(),
                    msg: e.to_string(),
                });
                let at = q.retry.partition_point(|j| j.seq < job.seq);
                q.retry.insert(at, job);
            }
            Err(e) => {
                if q.failure.is_none() {
                    q.failure = Some(Failure {
                        code: e.raw_os_error(),
                        kind: e.kind(),
                        msg: e.to_string(),
                    });
                }
            }
        }
        self.done.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::segments::segbuf::Filler;
    use flextree::MemFile;

    fn full_segment(byte: u8) -> Arc<SegBuf> {
        let mut f = Filler::new(SegBuf::new());
        f.push(&vec![byte; SEGMENT_SIZE as usize]).unwrap();
        f.seal()
    }

    #[test]
    fn sealed_segments_land_in_the_file() {
        let file = Arc::new(MemFile::new());
        let w = SegmentWriters::new(file.clone(), 2);
        for s in 0..4u32 {
            w.submit(s, full_segment(s as u8 + 1), u64::from(s) + 1);
        }
        w.wait_sealed(4).unwrap();
        assert_eq!(w.inflight(), 0);
        let bytes = file.to_bytes();
        for s in 0..4usize {
            let seg = &bytes[s * SEGMENT_SIZE as usize..(s + 1) * SEGMENT_SIZE as usize];
            assert!(seg.iter().all(|&b| b == s as u8 + 1));
        }
        assert_eq!(w.take_finished().len(), 4);
    }

    #[test]
    fn partial_flushes_pad_and_resume() {
        let file = MemFile::new();
        let mut f = Filler::new(SegBuf::new());
        f.push(&[7u8; 5000]).unwrap();
        flush(&file, 1, f.shared(), 5000).unwrap();
        let b = file.to_bytes();
        let base = SEGMENT_SIZE as usize;
        assert_eq!(b.len(), base + 8192);
        assert!(b[base..base + 5000].iter().all(|&x| x == 7));
        assert!(b[base + 5000..].iter().all(|&x| x == 0));
        f.push(&[9u8; 100]).unwrap();
        flush(&file, 1, f.shared(), 5100).unwrap();
        let b = file.to_bytes();
        assert!(b[base..base + 5000].iter().all(|&x| x == 7));
        assert!(b[base + 5000..base + 5100].iter().all(|&x| x == 9));
        // Nothing new: no write.
        flush(&file, 1, f.shared(), 5100).unwrap();
        assert!(flush(&file, 1, f.shared(), 6000).is_err());
    }

    /// A segment a full device refused stays in memory and is written by
    /// the next wait once there is room; meanwhile each wait reports the
    /// device full, and nothing counts as a lasting failure.
    #[test]
    fn a_refused_segment_is_written_again_once_there_is_room() {
        use crate::storage::fault::FaultStorage;
        use crate::storage::Storage;
        let st = FaultStorage::new();
        let file = st.open_file("data", true).unwrap();
        let w = SegmentWriters::new(file, 1);
        st.fill_device(0);
        w.submit(0, full_segment(5), 1);
        for _ in 0..2 {
            let e = w.wait_sealed(1).unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::ENOSPC));
            assert_eq!(w.refused(), 1);
            assert!(w.failure().is_none());
            assert!(w.take_finished().is_empty());
        }
        // A wait for earlier segments is not held up by it.
        w.wait_sealed(0).unwrap();
        st.free_device();
        w.wait_sealed(1).unwrap();
        assert_eq!(w.refused(), 0);
        assert_eq!(w.take_finished().len(), 1);
        let bytes = st.file_bytes("data").unwrap();
        assert_eq!(bytes.len(), SEGMENT_SIZE as usize);
        assert!(bytes.iter().all(|&b| b == 5));
    }
}
