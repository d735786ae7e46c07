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

/// Asks the kernel to start writing `file`'s dirty pages in
/// `from..from + len` to the device, without waiting for them. An error
/// is the system call's (callers may ignore it: see the module
/// invariants).
#[cfg(target_os = "linux")]
pub fn start(file: &std::fs::File, from: u64, len: u64) -> std::io::Result<()> {
    use std::os::unix::io::AsRawFd;
    let (Ok(from), Ok(len)) = (i64::try_from(from), i64::try_from(len)) else {
        return Err(std::io::Error::from(std::io::ErrorKind::InvalidInput));
    };
    // SAFETY: `sync_file_range` takes a descriptor, two integers and flags,
    // no pointers; `file` owns the descriptor for the whole call. With
    // SYNC_FILE_RANGE_WRITE alone it only queues write-back of the range.
    let rc =
        unsafe { libc::sync_file_range(file.as_raw_fd(), from, len, libc::SYNC_FILE_RANGE_WRITE) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Does nothing where `sync_file_range` does not exist.
#[cfg(not(target_os = "linux"))]
pub fn start(_file: &std::fs::File, _from: u64, _len: u64) -> std::io::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::fs::FileExt;

    #[test]
    fn stretches_stop_on_a_page() {
        assert_eq!(stop_at(0), 0);
        assert_eq!(stop_at(4095), 0);
        assert_eq!(stop_at(4096), 4096);
        assert_eq!(stop_at(WRITEBACK_BYTES + 100), WRITEBACK_BYTES);
    }

    #[test]
    fn write_back_leaves_the_bytes_as_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let mut f = std::fs::File::create(&path).unwrap();
        let bytes: Vec<u8> = (0..3 * PAGE as usize).map(|i| (i % 251) as u8).collect();
        f.write_all(&bytes).unwrap();
        start(&f, 0, 2 * PAGE).unwrap();
        // Ranges past the end and empty ones (to the end of the file) are
        // accepted too.
        start(&f, 10 * PAGE, PAGE).unwrap();
        start(&f, 0, 0).unwrap();
        f.write_all_at(b"again", 10).unwrap();
        f.sync_data().unwrap();
        let back = std::fs::read(&path).unwrap();
        assert_eq!(&back[..10], &bytes[..10]);
        assert_eq!(&back[10..15], b"again");
        assert_eq!(&back[15..], &bytes[15..]);
        // A range the kernel refuses (its end overflows) and one that no
        // file offset can hold are errors, not panics.
        assert!(start(&f, i64::MAX as u64 - 10, 100).is_err());
        assert!(start(&f, u64::MAX, 1).is_err());
    }
}
