//! Software prefetch: hints that bring memory into the cache ahead of a
//! walk whose next addresses are known but not yet needed.
//!
//! Invariant: a prefetch is only a hint. It never faults, whatever the
//! address, and has no effect a program can observe but its speed, so the
//! functions here are safe to call with any address.

/// Bytes of a cache line.
const LINE: usize = 64;

/// Asks for the `lines` cache lines starting with the one holding `start`.
#[inline]
fn lines(start: *const u8, lines: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let first = start.wrapping_sub(start as usize % LINE).cast::<i8>();
        for k in 0..lines {
            // SAFETY: a prefetch never faults and has no architectural
            // effect, whatever the address; the address is formed with
            // wrapping arithmetic, so forming it is defined.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(first.wrapping_add(k * LINE)) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (start, lines);
}

/// Asks for the cache lines of the `len` bytes starting at `start`, which
/// need not name memory at all.
#[inline]
pub fn at(start: *const u8, len: usize) {
    let skew = start as usize % LINE;
    lines(start, (skew + len).div_ceil(LINE));
}

/// Asks for every cache line of `bytes`.
#[inline]
pub fn bytes(bytes: &[u8]) {
    at(bytes.as_ptr(), bytes.len());
}

#[cfg(test)]
mod tests {
    #[test]
    fn any_address_may_be_prefetched() {
        let v = vec![7u8; 300];
        super::bytes(&v);
        super::bytes(&v[5..5]);
        // Addresses that name no memory: only hints, never faults.
        super::lines(std::ptr::null(), 4);
        super::lines(usize::MAX as *const u8, 2);
        super::at(std::ptr::null(), 1000);
        super::at((usize::MAX - 10) as *const u8, 192);
        assert_eq!(v[299], 7);
    }
}
