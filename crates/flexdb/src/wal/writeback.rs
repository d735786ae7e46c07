//! Early write-back of a log's pages: the kernel is asked to start writing
//! a stretch of the file to the device now, without waiting for it, so
//! that the fsync which later makes the log durable finds little left to
//! write.
//!
//! Why: a MemTable's log is a shared mapping of up to a few hundred MiB.
//! Left to the kernel, its pages stay dirty until the log is synced, and
//! that fsync (under the writer lock when the MemTable rotates) then
//! writes them all at once: 0.5-1.1 s measured at 10 M pairs, every writer
//! stalled meanwhile. docs/DESIGN.md, "The log written back as it fills",
//! has the measurements.
//!
//! The log drops a stretch's pages from its mappings before asking
//! (`mapped::release_pages`), so that the kernel need not write-protect
//! each mapped page, a TLB shootdown apiece, before writing it.
//!
//! The request itself is `flexspace::MappableFile::start_write_back`
//! (`sync_file_range` on real files; nothing on the fault-injecting
//! backend, where it would change nothing a crash may leave).
//!
//! Invariants: a hint only. Nothing here makes anything durable or
//! changes what a crash may leave (durability still comes from the sync
//! alone); a failure is ignored, since the sync that follows reports any
//! real I/O error; on systems without `sync_file_range` it does nothing.

/// Bytes appended to a log between two write-back requests.
pub const WRITEBACK_BYTES: u64 = 4 << 20;

/// The page size the requested stretches end on (a partly written page
/// would be written now and dirtied again by the next append).
const PAGE: u64 = 4096;

/// Where a write-back request for a log written up to `end` should stop:
/// `end` rounded down to a page.
pub fn stop_at(end: u64) -> u64 {
    end / PAGE * PAGE
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stretches_stop_on_a_page() {
        assert_eq!(stop_at(0), 0);
        assert_eq!(stop_at(4095), 0);
        assert_eq!(stop_at(4096), 4096);
        assert_eq!(stop_at(WRITEBACK_BYTES + 100), WRITEBACK_BYTES);
    }
}
