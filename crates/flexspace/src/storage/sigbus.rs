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
//!   initialized thread-local atomic: nothing that allocates or locks.
//! - A zero page replaces a file page only between a fault and the end of
//!   the faulting copy. Another thread copying the same page in that
//!   window gets zeros without a fault: flexdb's pairs carry checksums,
//!   so that read fails as `Corrupt`, never as a wrong value.
//! - A slot is cleared before its mapping is unmapped, and an address is
//!   only ever looked up while a copy from its mapping runs.

use std::sync::atomic::{compiler_fence, AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, Once, OnceLock};

/// Mappings that can be registered at once (more are read unguarded).
const SLOTS: usize = 64;

/// `(start, len)` of each registered mapping; `len` 0 is a free slot.
static RANGES: [(AtomicUsize, AtomicUsize); SLOTS] =
    [const { (AtomicUsize::new(0), AtomicUsize::new(0)) }; SLOTS];
/// Serializes registration (the handler reads without it).
static REGISTER: Mutex<()> = Mutex::new(());
static INSTALL: Once = Once::new();
/// The SIGBUS action before ours, for faults outside the mappings.
static PREVIOUS: OnceLock<libc::sigaction> = OnceLock::new();

thread_local! {
    /// Set by the handler when a copy on this thread faulted (an atomic,
    /// and fences around the copy, so the compiler neither caches it
    /// across the copy nor moves the copy past it).
    static FAULTED: AtomicBool = const { AtomicBool::new(false) };
}

fn page_size() -> usize {
    // SAFETY: sysconf reads a constant of the system; no memory is touched.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(p).unwrap_or(4096).max(4096)
}

/// Registers `start..start + len` (a mapping); returns its slot, or `None`
/// when the table is full (reads of that mapping are then unguarded, as
/// before this module) or the handler could not be installed.
pub(crate) fn register(start: usize, len: usize) -> Option<usize> {
    INSTALL.call_once(install);
    PREVIOUS.get()?;
    let _g = REGISTER.lock().unwrap_or_else(|e| e.into_inner());
    let slot = RANGES
        .iter()
        .position(|(_, l)| l.load(Ordering::Acquire) == 0)?;
    RANGES[slot].0.store(start, Ordering::Release);
    RANGES[slot].1.store(len, Ordering::Release);
    Some(slot)
}

/// Frees `slot` (before its mapping is unmapped).
pub(crate) fn unregister(slot: usize) {
    let _g = REGISTER.lock().unwrap_or_else(|e| e.into_inner());
    RANGES[slot].1.store(0, Ordering::Release);
}

fn registered(addr: usize) -> bool {
    RANGES.iter().any(|(s, l)| {
        let len = l.load(Ordering::Acquire);
        let start = s.load(Ordering::Acquire);
        len > 0 && addr >= start && addr - start < len
    })
}

fn install() {
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
        let page = addr & !(page_size() - 1);
        // SAFETY: replaces one page inside a registered read-only mapping
        // (its owner keeps it mapped while a copy from it runs) with a
        // private zero page; no Rust reference points into the mapping.
        let p = unsafe {
            libc::mmap(
                page as *mut libc::c_void,
                page_size(),
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
