//! The store's own threads: their scheduling priority and CPU time.
//!
//! Invariant: both are best effort and per thread; neither changes another
//! thread's priority nor fails the caller.

/// Gives the calling thread the lowest scheduling priority (nice 19), so it
/// runs on what the store's other threads and its clients leave idle and
/// never takes a core from the committer. Best effort: a failure leaves the
/// priority as it was.
pub(crate) fn lowest_priority() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: `gettid` takes no arguments and cannot fail.
        let tid = unsafe { libc::gettid() };
        // SAFETY: `setpriority` takes no pointers; on Linux, with a thread
        // id and `PRIO_PROCESS`, it changes that thread alone. Lowering a
        // priority needs no privilege; the result is deliberately ignored.
        unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, 19) };
    }
}

/// CPU time of the calling thread (for the commit trace).
pub(crate) fn thread_cpu() -> std::time::Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    std::time::Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}
