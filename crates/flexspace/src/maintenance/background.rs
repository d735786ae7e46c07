//! The background maintainer of automatic maintenance: a thread that runs
//! the space's maintenance ([`Maintained::run_maintenance`], i.e.
//! `SpaceInner::maintain`) when mutations report work due (a commit, garbage
//! collection, a checkpoint), so that the mutating threads do not wait for
//! commit I/O.
//!
//! Invariants:
//! - At most one maintainer thread per space runs at a time; it starts on
//!   demand and exits after a short idle time, or once the space stops it
//!   (close or drop): [`BackgroundMaintainer::stop`] joins it, so after a close or
//!   drop no maintenance of the space runs any more. A leaked space's
//!   thread exits after the idle time.
//! - The thread holds only a weak reference while idle.
//! - An error of background maintenance is kept for the next call on the
//!   space to return (the failed commit has already poisoned the space),
//!   except a full device's refusal, which left the space usable: a sync
//!   or checkpoint drops it, makes the commit again and reports its own
//!   outcome.

use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

/// What the maintainer maintains (the space's shared part). A trait, so
/// that this module does not depend on the space's.
pub trait Maintained: Send + Sync + 'static {
    /// Runs the maintenance that is due, keeping an error for the next
    /// caller of the space.
    fn run_maintenance(&self);
}

/// Whether the calling thread is a background maintainer.
pub fn in_background() -> bool {
    IN_BACKGROUND.with(|b| b.get())
}

thread_local! {
    /// Set on the maintainer thread: a step that poisons the space there
    /// leaves its error for the next caller at the moment it poisons
    /// (`SpaceInner::poison`), so no caller sees `Poisoned` before the cause.
    static IN_BACKGROUND: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// How long an idle maintainer waits for work before it exits.
const IDLE: Duration = Duration::from_millis(200);

#[derive(Default)]
struct Flags {
    requested: bool,
    running: bool,
    stopped: bool,
}

/// The maintainer's state (part of a space).
#[derive(Default)]
pub struct BackgroundMaintainer {
    flags: Mutex<Flags>,
    cv: Condvar,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl BackgroundMaintainer {
    /// Asks for maintenance, starting the thread if it is not running.
    pub fn kick<M: Maintained>(self: &Arc<Self>, shared: &Arc<M>) {
        let mut f = self.flags.lock();
        if f.stopped {
            return;
        }
        f.requested = true;
        if f.running {
            self.cv.notify_one();
            return;
        }
        let weak = Arc::downgrade(shared);
        let bg = self.clone();
        let spawned = std::thread::Builder::new()
            .name("flexspace-maint".into())
            .spawn(move || run(&bg, weak));
        // Without a thread, maintenance happens inline once the log buffer
        // has grown far enough (see `SpaceInner::mutate`).
        f.running = spawned.is_ok();
        if let Ok(h) = spawned {
            // The previous thread (if any) has exited: it cleared `running`.
            *self.thread.lock() = Some(h);
        }
    }

    /// No more maintenance: waits for the thread to finish its current step
    /// and exit. Call with no lock of the space held.
    pub fn stop(&self) {
        self.flags.lock().stopped = true;
        self.cv.notify_all();
        let handle = self.thread.lock().take();
        if let Some(h) = handle {
            if h.thread().id() != std::thread::current().id() {
                let _ = h.join();
            }
        }
    }

    /// Waits for a request; false when the thread should exit.
    fn wait(&self) -> bool {
        let mut f = self.flags.lock();
        while !f.requested {
            if f.stopped || self.cv.wait_for(&mut f, IDLE).timed_out() && !f.requested {
                f.running = false;
                return false;
            }
        }
        f.requested = false;
        !f.stopped
    }
}

fn run<M: Maintained>(bg: &BackgroundMaintainer, weak: Weak<M>) {
    IN_BACKGROUND.with(|b| b.set(true));
    while bg.wait() {
        let Some(shared) = weak.upgrade() else {
            return;
        };
        shared.run_maintenance();
    }
}
