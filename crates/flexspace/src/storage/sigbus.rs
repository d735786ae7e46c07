//! Surviving SIGBUS in mapped reads: an I/O error while the kernel reads
//! a page of a [`super::Mapping`] in (or a file cut short under it) turns
//! into a failed read instead of the end of the process.
//!
//! How: the ranges of live mappings are registered in a fixed table. A
//! process-wide SIGBUS handler, installed with the first registration,
//! looks the faulting address up; inside a registered range it maps a
//! private zero page over the faulting page (so the interrupted copy can
//! finish), notes the fault in a thread-local flag and returns. The
//! reader ([`guarded_copy`]) sees the flag after its copy, maps the
//! file's pages back over the range it copied and reports the read as
//! failed, so its caller falls back to `pread`, which returns the device's
//! error as a typed one. A fault anywhere else goes to the handler that
//! was installed before (Rust's stack-overflow report, or the default
//! action, which ends the process as before).
//!
//! Invariants:
//! - The handler only reads atomics, calls `mmap` and sets a const-
//!   initialized thread-local atomic: nothing that allocates or locks, and
//!   no call POSIX does not list as async-signal-safe (the page size is
//!   read once, by `install`, before the handler can run).
//! - A zero page replaces a file page only between a fault and the end of
//!   the faulting copy. Another thread copying the same page in that
//!   window gets zeros without a fault: flexdb's pairs carry checksums,
//!   so that read fails as `Corrupt`, never as a wrong value.
//! - A slot is set after its mapping is mapped and cleared before it is
//!   unmapped, so a copy from a registered mapping always finds its slot.
//! - The handler sees a slot's `start` and `len` as one registration set
//!   them, never a new start with an old length: a sequence word, odd
//!   while the two change, is read around them (a seqlock), and a slot
//!   that changed meanwhile is passed over. That is right: a slot changes
//!   only before its mapping is read or once it no longer is, so no fault
//!   in a copy from a mapping can be in a slot that is changing.

use std::sync::atomic::{compiler_fence, fence, AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, Once, OnceLock};

/// Mappings that can be registered at once (more are read unguarded).
const SLOTS: usize = 64;

/// One registered range (`len` 0: free), behind a sequence word.
struct Slot {
    /// Odd while `start` and `len` change; two steps per change.
    seq: AtomicUsize,
    start: AtomicUsize,
    len: AtomicUsize,
}

impl Slot {
    /// A free slot.
    const fn free() -> Slot {
        Slot {
            seq: AtomicUsize::new(0),
            start: AtomicUsize::new(0),
            len: AtomicUsize::new(0),
        }
    }

    /// Sets the range (`len` 0 frees the slot). Callers serialize their
    /// changes (`REGISTER`); `range` may run meanwhile, on any thread or
    /// in the handler.
    fn set(&self, start: usize, len: usize) {
        let seq = self.seq.load(Ordering::Relaxed);
        self.seq.store(seq.wrapping_add(1), Ordering::Relaxed);
        // The odd word is seen before either store below by any reader
        // that sees one of them.
        fence(Ordering::Release);
        self.start.store(start, Ordering::Relaxed);
        self.len.store(len, Ordering::Relaxed);
        self.seq.store(seq.wrapping_add(2), Ordering::Release);
    }

    /// Whether the slot is free (for `register`, under `REGISTER`).
    fn is_free(&self) -> bool {
        self.len.load(Ordering::Relaxed) == 0
    }

    /// `(start, len)` as one `set` left them, or `None` when the slot is
    /// free or a `set` ran meanwhile. Async-signal-safe (atomics only).
    fn range(&self) -> Option<(usize, usize)> {
        let seq = self.seq.load(Ordering::Acquire);
        if seq & 1 == 1 {
            return None;
        }
        let start = self.start.load(Ordering::Relaxed);
        let len = self.len.load(Ordering::Relaxed);
        // The two loads above happen before the second look at the word.
        fence(Ordering::Acquire);
        (len > 0 && self.seq.load(Ordering::Relaxed) == seq).then_some((start, len))
    }
}

/// The registered mappings.
static RANGES: [Slot; SLOTS] = [const { Slot::free() }; SLOTS];
/// Serializes registration (the handler reads without it).
static REGISTER: Mutex<()> = Mutex::new(());
static INSTALL: Once = Once::new();
/// The SIGBUS action before ours, for faults outside the mappings.
static PREVIOUS: OnceLock<libc::sigaction> = OnceLock::new();
/// The page size, read by `install` before the handler exists: the
/// handler may not call `sysconf`, which is not async-signal-safe.
static PAGE_SIZE: AtomicUsize = AtomicUsize::new(4096);

thread_local! {
    /// Set by the handler when a copy on this thread faulted (an atomic,
    /// and fences around the copy, so the compiler neither caches it
    /// across the copy nor moves the copy past it).
    static FAULTED: AtomicBool = const { AtomicBool::new(false) };
}

/// The page size `install` read. Its readers (the handler, for an address
/// in a slot, and `guarded_copy`, for a registered mapping) run after a
/// registration, which `install` precedes: they see the system's value.
fn page_size() -> usize {
    PAGE_SIZE.load(Ordering::Relaxed)
}

/// Registers `start..start + len` (a mapping); returns its slot, or `None`
/// when the table is full (reads of that mapping are then unguarded, as
/// before this module) or the handler could not be installed.
pub(crate) fn register(start: usize, len: usize) -> Option<usize> {
    INSTALL.call_once(install);
    PREVIOUS.get()?;
    let _g = REGISTER.lock().unwrap_or_else(|e| e.into_inner());
    let slot = RANGES.iter().position(Slot::is_free)?;
    RANGES[slot].set(start, len);
    Some(slot)
}

/// Frees `slot` (before its mapping is unmapped).
pub(crate) fn unregister(slot: usize) {
    let _g = REGISTER.lock().unwrap_or_else(|e| e.into_inner());
    RANGES[slot].set(0, 0);
}

/// Whether `addr` lies in a registered mapping. Each slot's start and
/// length come from one registration (`Slot::range`); a slot changing
/// meanwhile is not one a copy is reading from (module invariants).
fn registered(addr: usize) -> bool {
    RANGES
        .iter()
        .filter_map(Slot::range)
        .any(|(start, len)| addr >= start && addr - start < len)
}

fn install() {
    // SAFETY: sysconf reads a constant of the system; no memory is touched.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    let page = usize::try_from(page).unwrap_or(4096).max(4096);
    PAGE_SIZE.store(page, Ordering::Relaxed);
    // SAFETY: a zeroed sigaction is a valid value to fill in; sigaction
    // writes the old action into `old` and installs `new`, whose handler
    // has the SA_SIGINFO signature. The old action is stored before any
    // mapping is registered, so the handler always finds it.
    unsafe {
        let mut new: libc::sigaction = std::mem::zeroed();
        let handler: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
            on_sigbus;
        new.sa_sigaction = handler as libc::sighandler_t;
        new.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        libc::sigemptyset(&mut new.sa_mask);
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(libc::SIGBUS, &new, &mut old) == 0 {
            let _ = PREVIOUS.set(old);
        }
    }
}

extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for a SA_SIGINFO handler.
    let addr = unsafe { (*info).si_addr() } as usize;
    if registered(addr) {
        let ps = page_size();
        let page = addr & !(ps - 1);
        // SAFETY: replaces one page inside a registered read-only mapping
        // (its owner keeps it mapped while a copy from it runs) with a
        // private zero page; no Rust reference points into the mapping.
        let p = unsafe {
            libc::mmap(
                page as *mut libc::c_void,
                ps,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                -1,
                0,
            )
        };
        if p != libc::MAP_FAILED {
            FAULTED.with(|f| f.store(true, Ordering::Relaxed));
            return;
        }
    }
    let Some(prev) = PREVIOUS.get() else { return };
    let h = prev.sa_sigaction;
    if h == libc::SIG_DFL || h == libc::SIG_IGN {
        // SAFETY: restores the default action; returning re-runs the
        // faulting instruction, which then ends the process as it would
        // have without this module.
        unsafe {
            let mut dfl: libc::sigaction = std::mem::zeroed();
            dfl.sa_sigaction = libc::SIG_DFL;
            libc::sigaction(libc::SIGBUS, &dfl, std::ptr::null_mut());
        }
    } else if prev.sa_flags & libc::SA_SIGINFO != 0 {
        // SAFETY: the previous handler was installed with this signature.
        let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
            unsafe { std::mem::transmute(h) };
        f(sig, info, ctx);
    } else {
        // SAFETY: the previous handler was installed with this signature.
        let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(h) };
        f(sig);
    }
}

/// Copies `out.len()` bytes from `src` (inside a registered mapping of
/// `fd` at file offset `file_offset`); false when a page failed to read
/// in (the file's pages are mapped back first, so a later read tries the
/// device again).
///
/// # Safety
/// `src..src + out.len()` must lie in a live read-only `MAP_SHARED`
/// mapping of `fd` that maps file offset `file_offset` at `src`, and
/// nothing may write to that range while the copy runs.
pub(crate) unsafe fn guarded_copy(
    src: *const u8,
    out: &mut [u8],
    fd: i32,
    file_offset: u64,
) -> bool {
    FAULTED.with(|f| f.store(false, Ordering::Relaxed));
    compiler_fence(Ordering::SeqCst);
    // SAFETY: the caller's contract: `src` is readable for `out.len()`
    // bytes; a faulting page is replaced by the handler, not left to kill.
    unsafe { std::ptr::copy_nonoverlapping(src, out.as_mut_ptr(), out.len()) };
    compiler_fence(Ordering::SeqCst);
    if !FAULTED.with(|f| f.swap(false, Ordering::Relaxed)) {
        return true;
    }
    let ps = page_size();
    let first = src as usize & !(ps - 1);
    let end = (src as usize + out.len()).next_multiple_of(ps);
    let back = (src as usize - first) as u64;
    let off = file_offset
        .checked_sub(back)
        .and_then(|o| libc::off_t::try_from(o).ok());
    if let Some(off) = off {
        // SAFETY: maps the file's own pages back over the range the copy
        // read, inside the caller's mapping of `fd`, exactly as the
        // mapping had them (read-only, shared, same offsets). Should it
        // fail, the zero pages stay: later copies of them give zeros,
        // which the pairs' checksums refuse.
        unsafe {
            libc::mmap(
                first as *mut libc::c_void,
                end - first,
                libc::PROT_READ,
                libc::MAP_SHARED | libc::MAP_FIXED,
                fd,
                off,
            );
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    /// A slot registered, freed and registered again with other ranges
    /// while readers look at it: every range a reader sees is one that was
    /// set, never one registration's start with another's length.
    #[test]
    fn a_slot_is_never_seen_half_changed() {
        const RANGES_SET: [(usize, usize); 3] = [(0x1000, 0x10), (0x9000, 0x1), (0x4000, 0x300)];
        // Long enough for the readers to overlap many changes.
        let (changes, least) = if cfg!(miri) {
            (200, std::time::Duration::ZERO)
        } else {
            (1_000, std::time::Duration::from_millis(300))
        };
        let began = std::time::Instant::now();
        let slot = Arc::new(Slot::free());
        let done = Arc::new(AtomicBool::new(false));
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let (slot, done) = (slot.clone(), done.clone());
                std::thread::spawn(move || {
                    let mut seen = false;
                    while !seen || !done.load(Ordering::Relaxed) {
                        if let Some(r) = slot.range() {
                            assert!(RANGES_SET.contains(&r), "a mixed range {r:x?}");
                            seen = true;
                        }
                    }
                })
            })
            .collect();
        let mut i = 0;
        while i < changes || began.elapsed() < least {
            let (start, len) = RANGES_SET[i % RANGES_SET.len()];
            slot.set(start, len);
            assert!(!slot.is_free());
            if i % 5 == 4 {
                slot.set(0, 0);
                assert!(slot.is_free() && slot.range().is_none());
            }
            i += 1;
        }
        slot.set(RANGES_SET[0].0, RANGES_SET[0].1);
        done.store(true, Ordering::Relaxed);
        for r in readers {
            r.join().unwrap();
        }
    }

    /// The handler's page size is the system's, read at install.
    #[test]
    #[cfg_attr(miri, ignore = "sigaction is not supported under Miri")]
    fn the_page_size_is_read_at_install() {
        INSTALL.call_once(install);
        // SAFETY: sysconf reads a constant of the system.
        let system = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        assert_eq!(page_size() as libc::c_long, system.max(4096));
        assert!(page_size().is_power_of_two());
    }
}
