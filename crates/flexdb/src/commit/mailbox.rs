//! The committer's mailbox: whether the store shuts down or stopped, and
//! the newest generation committed, with the condition variables that wake
//! the committer (new work) and `flush` (a commit finished).
//!
//! Invariants: `committed_gen` only grows; `stopped` is set once and never
//! cleared; `no_space` is set while the committer's last attempt failed for
//! want of room (cleared by its next commit), and `no_space_failures`
//! counts such attempts, only growing; every change is announced under the mailbox lock, which the
//! waiters hold between checking and sleeping, so no wakeup falls between
//! the two. A condition variable serves one mutex only, hence one for the
//! committer and one for `flush` waiters (writers stalled on a full backlog
//! wait under the writer lock, see `write`).

use std::time::Duration;

use parking_lot::{Condvar, Mutex, MutexGuard};

use crate::error::{Error, Result};

/// What the mailbox holds.
#[derive(Default)]
struct Mail {
    shutdown: bool,
    /// Generations up to this one are durable in the space.
    committed_gen: u64,
    /// Why the store stopped taking writes, if it did.
    stopped: Option<String>,
    /// Why the committer's last attempt failed for want of room, if it did
    /// (it retries: see `commit::run`).
    no_space: Option<String>,
    /// Commit attempts that failed for want of room.
    no_space_failures: u64,
    /// A snapshot let go of a replaced view: the committer should reap.
    reap: bool,
    /// Views asked for by `compact` (the space moved data: a fresh view
    /// lets go of the old segments), and views published for them.
    republish_asked: u64,
    republished: u64,
}

/// The committer's mailbox (see the module docs).
pub(crate) struct CommitterMailbox {
    mail: Mutex<Mail>,
    /// Wakes the committer.
    work_cv: Condvar,
    /// Wakes `flush` waiters.
    flushed_cv: Condvar,
}

/// The mailbox, locked by the committer to look for work and sleep.
pub(crate) struct MailboxGuard<'a> {
    mailbox: &'a CommitterMailbox,
    mail: MutexGuard<'a, Mail>,
}

impl MailboxGuard<'_> {
    /// Whether the store stopped.
    pub fn stopped(&self) -> bool {
        self.mail.stopped.is_some()
    }

    /// Whether the store is shutting down.
    pub fn shutting_down(&self) -> bool {
        self.mail.shutdown
    }

    /// Whether a snapshot asked for replaced views to be reaped (and
    /// clears the request).
    pub fn take_reap(&mut self) -> bool {
        std::mem::take(&mut self.mail.reap)
    }

    /// Whether a fresh view was asked for and not yet published.
    pub fn republish_wanted(&self) -> bool {
        self.mail.republished < self.mail.republish_asked
    }

    /// Sleeps until woken (the lock is let go of meanwhile).
    pub fn wait(&mut self) {
        self.mailbox.work_cv.wait(&mut self.mail);
    }

    /// Sleeps until woken or `timeout` passes; true if it passed.
    pub fn wait_for(&mut self, timeout: Duration) -> bool {
        self.mailbox
            .work_cv
            .wait_for(&mut self.mail, timeout)
            .timed_out()
    }
}

impl CommitterMailbox {
    /// A mailbox whose generations up to `committed_gen` are committed.
    pub fn new(committed_gen: u64) -> CommitterMailbox {
        CommitterMailbox {
            mail: Mutex::new(Mail {
                committed_gen,
                ..Mail::default()
            }),
            work_cv: Condvar::new(),
            flushed_cv: Condvar::new(),
        }
    }

    /// The mailbox, locked (for the committer).
    pub fn lock(&self) -> MailboxGuard<'_> {
        MailboxGuard {
            mailbox: self,
            mail: self.mail.lock(),
        }
    }

    /// Records that a commit attempt failed for want of room (`why`), and
    /// wakes `flush` waiters, who report it.
    pub fn no_space(&self, why: String) {
        let mut m = self.mail.lock();
        m.no_space = Some(why);
        m.no_space_failures += 1;
        drop(m);
        self.flushed_cv.notify_all();
    }

    /// Refuses a write that would wait for the committer while its last
    /// attempt failed for want of room (it retries within
    /// `commit::NO_SPACE_WAIT_MAX`, at once for a `flush`).
    pub fn check_no_space(&self) -> Result<()> {
        match &self.mail.lock().no_space {
            Some(why) => Err(Error::NoSpace(why.clone())),
            None => Ok(()),
        }
    }

    /// Refuses writes once the store stopped.
    pub fn check_stopped(&self) -> Result<()> {
        match &self.mail.lock().stopped {
            Some(why) => Err(Error::Stopped(why.clone())),
            None => Ok(()),
        }
    }

    /// Records why the store stopped (the first reason stays) and wakes the
    /// committer and `flush` waiters.
    pub fn stop(&self, why: String) {
        let mut m = self.mail.lock();
        if m.stopped.is_none() {
            m.stopped = Some(why);
        }
        drop(m);
        self.work_cv.notify_all();
        self.flushed_cv.notify_all();
    }

    /// Tells the committer there is work (a MemTable was frozen).
    pub fn wake_committer(&self) {
        // Under the lock: the committer checks for work and sleeps under
        // it, so the wakeup cannot fall between the two.
        let _m = self.mail.lock();
        self.work_cv.notify_all();
    }

    /// Asks the committer to drop the replaced views no reader holds (a
    /// snapshot let go of one).
    pub fn want_reap(&self) {
        let mut m = self.mail.lock();
        m.reap = true;
        self.work_cv.notify_all();
    }

    /// Asks the committer for a fresh view of the space and waits until it
    /// published one (or the store stopped).
    pub fn republish(&self) -> Result<()> {
        let mut m = self.mail.lock();
        m.republish_asked += 1;
        let want = m.republish_asked;
        self.work_cv.notify_all();
        loop {
            if let Some(why) = &m.stopped {
                return Err(Error::Stopped(why.clone()));
            }
            if m.republished >= want {
                return Ok(());
            }
            self.flushed_cv.wait_for(&mut m, Duration::from_millis(100));
        }
    }

    /// Records that a view asked for by `republish` is published (every
    /// request made so far is answered by it).
    pub fn republished(&self) {
        let mut m = self.mail.lock();
        m.republished = m.republish_asked;
        self.flushed_cv.notify_all();
    }

    /// Tells the committer to finish once nothing is left to commit.
    pub fn shut_down(&self) {
        self.mail.lock().shutdown = true;
        self.work_cv.notify_all();
    }

    /// Records that generations up to `gen` are committed, and wakes
    /// `flush` waiters.
    pub fn committed(&self, gen: u64) {
        let mut m = self.mail.lock();
        m.committed_gen = m.committed_gen.max(gen);
        m.no_space = None;
        self.flushed_cv.notify_all();
    }

    /// Waits until generation `target` is committed, or the store stopped,
    /// or a commit attempt made meanwhile failed for want of room (that
    /// error: the generations stay in the MemTables and their logs, for
    /// the committer to retry).
    pub fn wait_committed(&self, target: u64) -> Result<()> {
        let mut m = self.mail.lock();
        let failures = m.no_space_failures;
        // The committer may be waiting before its next attempt: this one
        // is to be made now.
        self.work_cv.notify_all();
        loop {
            if let Some(why) = &m.stopped {
                return Err(Error::Stopped(why.clone()));
            }
            if m.committed_gen < target && m.no_space_failures > failures {
                let why = m.no_space.clone().unwrap_or_default();
                return Err(Error::NoSpace(why));
            }
            if m.committed_gen >= target {
                return Ok(());
            }
            self.flushed_cv.wait_for(&mut m, Duration::from_millis(100));
        }
    }
}
