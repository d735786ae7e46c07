//! The machine's physical memory, for options that size tables up front
//! from a byte budget: a budget beyond it can never be used, and tables
//! sized from it would exhaust memory when first touched, so FlexDB
//! refuses it with a typed error instead.
//!
//! Invariant: `physical_memory` only reads system configuration; `None`
//! means the system did not say (or, under Miri, was not asked).

/// The machine's physical memory in bytes, if the system says.
#[cfg(all(unix, not(miri)))]
pub fn physical_memory() -> Option<u64> {
    // SAFETY: sysconf only reads system configuration; it has no
    // preconditions and returns -1 for a name the system does not know.
    let (pages, size) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGE_SIZE),
        )
    };
    let (pages, size) = (u64::try_from(pages).ok()?, u64::try_from(size).ok()?);
    pages.checked_mul(size)
}

/// The machine's physical memory in bytes: unknown here.
#[cfg(not(all(unix, not(miri))))]
pub fn physical_memory() -> Option<u64> {
    None
}

#[cfg(test)]
mod tests {
    #[test]
    #[cfg_attr(miri, ignore)]
    fn a_machine_has_some_memory_and_not_an_exabyte() {
        let m = super::physical_memory().expect("the system reports its memory");
        assert!(m >= 64 << 20, "{m}");
        assert!(m < 1 << 60, "{m}");
    }
}
