//! Copies between two real files that share the file system's blocks
//! where it can: a reflink (`FICLONERANGE`, XFS, Btrfs, bcachefs, ...),
//! else an in-kernel copy (`copy_file_range`); what the kernel refuses,
//! the caller copies through a buffer.
//!
//! Invariants: a copy returns how much of the range, from its start, is
//! in the destination (shared or copied: the caller copies the rest
//! through a buffer, `flextree::copy_through_buffer`) or an error; the
//! source is only read. A reflink is all or nothing for its range (the kernel remaps the
//! whole range or none of it), so a refused one falls back to copying the
//! same range whole. The count returned is the bytes a reflink shared:
//! `copy_file_range` may share blocks too on some file systems, but does
//! not say so, and is counted as copied.

use std::fs::File;
use std::io;
use std::os::unix::io::AsRawFd;

/// What a kernel copy did: the bytes a reflink shared, and how many bytes
/// from the start of the range are in place (shared or copied); the
/// caller copies the rest through a buffer.
pub struct KernelCopy {
    pub shared: u64,
    pub done: u64,
}

/// Copies as much of `len` bytes at `src_offset` of `from` to `offset` of
/// `to` as the kernel will: a reflink of the whole range (`shared == len`)
/// or `copy_file_range` until it is refused (see [`KernelCopy`]).
pub fn copy_range(
    from: &File,
    to: &File,
    src_offset: u64,
    offset: u64,
    len: u64,
) -> io::Result<KernelCopy> {
    if len == 0 {
        return Ok(KernelCopy { shared: 0, done: 0 });
    }
    match reflink(from, to, src_offset, offset, len) {
        Ok(()) => {
            return Ok(KernelCopy {
                shared: len,
                done: len,
            })
        }
        Err(e) if cannot(&e) => {}
        Err(e) => return Err(e),
    }
    let done = copy_in_kernel(from, to, src_offset, offset, len)?;
    Ok(KernelCopy { shared: 0, done })
}

/// Whether an error of `FICLONERANGE` or `copy_file_range` only says that
/// this kind of copy cannot be done here (another way may), not that the
/// files are at fault.
fn cannot(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(
            libc::EOPNOTSUPP
                | libc::ENOTTY
                | libc::EXDEV
                | libc::EINVAL
                | libc::ENOSYS
                | libc::ETXTBSY
                | libc::EPERM
        )
    )
}

fn offset_of(x: u64) -> io::Result<i64> {
    i64::try_from(x).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "offset past the largest file offset",
        )
    })
}

/// Shares `len` bytes at `src_offset` of `from` as `offset..` of `to`.
/// The file system refuses (`EINVAL`) unless both offsets and the length
/// are multiples of its block size, or the range ends at `from`'s end.
fn reflink(from: &File, to: &File, src_offset: u64, offset: u64, len: u64) -> io::Result<()> {
    offset_of(src_offset + len)?;
    offset_of(offset + len)?;
    let range = libc::file_clone_range {
        src_fd: i64::from(from.as_raw_fd()),
        src_offset,
        src_length: len,
        dest_offset: offset,
    };
    // SAFETY: FICLONERANGE reads the `file_clone_range` we pass by
    // pointer, which lives on our stack for the whole call, and changes
    // only the destination file's blocks; both descriptors are open files
    // we hold.
    let rc = unsafe { libc::ioctl(to.as_raw_fd(), libc::FICLONERANGE, &range) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Copies the range with `copy_file_range` (no trip through user
/// memory) and returns how many bytes from its start are copied: fewer
/// than `len` where the kernel refuses to go on.
fn copy_in_kernel(
    from: &File,
    to: &File,
    src_offset: u64,
    offset: u64,
    len: u64,
) -> io::Result<u64> {
    let mut off_in = offset_of(src_offset)?;
    let mut off_out = offset_of(offset)?;
    offset_of(src_offset + len)?;
    offset_of(offset + len)?;
    let mut left = len;
    while left > 0 {
        let want = usize::try_from(left.min(1 << 30)).unwrap_or(1 << 30);
        // SAFETY: copy_file_range reads and updates the two offsets we
        // pass by pointer (locals that outlive the call) and moves bytes
        // between two open descriptors we hold; it touches no other
        // memory of ours.
        let n = unsafe {
            libc::copy_file_range(
                from.as_raw_fd(),
                &mut off_in,
                to.as_raw_fd(),
                &mut off_out,
                want,
                0,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            if cannot(&e) {
                return Ok(len - left);
            }
            return Err(e);
        }
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the source of a copy ended before the range did",
            ));
        }
        left -= n as u64;
    }
    Ok(len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;

    fn file_with(dir: &std::path::Path, name: &str, bytes: &[u8]) -> File {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(dir.join(name))
            .unwrap();
        f.write_all_at(bytes, 0).unwrap();
        f
    }

    #[test]
    fn copies_whole_aligned_and_unaligned_ranges() {
        let dir = tempfile::tempdir().unwrap();
        let bytes: Vec<u8> = (0..3 * 4096 + 100).map(|i| (i * 7 % 251) as u8).collect();
        let from = file_with(dir.path(), "from", &bytes);
        let to = file_with(dir.path(), "to", &[]);
        // Aligned, to the source's end, and unaligned in the middle.
        for (src, dst, n) in [
            (0, 0, 4096),
            (4096, 8192, bytes.len() as u64 - 4096),
            (10, 4096 + 10, 1000),
        ] {
            // (Every Linux file system here takes copy_file_range.)
            assert_eq!(copy_range(&from, &to, src, dst, n).unwrap().done, n);
        }
        let mut got = vec![0u8; 8192 + bytes.len() - 4096];
        to.read_exact_at(&mut got, 0).unwrap();
        assert_eq!(&got[..4096], &bytes[..4096]);
        assert_eq!(&got[4096 + 10..4096 + 1010], &bytes[10..1010]);
        assert_eq!(&got[8192..], &bytes[4096..]);
        assert_eq!(copy_range(&from, &to, 0, 0, 0).unwrap().done, 0);
    }

    #[test]
    fn a_range_past_the_source_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let from = file_with(dir.path(), "from", &[1u8; 5000]);
        let to = file_with(dir.path(), "to", &[]);
        assert!(copy_range(&from, &to, 4096, 0, 8192).is_err());
        assert!(copy_range(&from, &to, 0, 0, u64::MAX).is_err());
    }
}
