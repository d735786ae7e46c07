//! `flexbench diag scattered-copy`: what a read of a fragmented interval
//! costs through the data file's mapping. Six copies of 300 bytes at
//! random places of a large file whose pages are all in the page cache and
//! mapped (a 10 M-pair store's interval spans about six extents), copied
//! one after another, or after asking for every part's cache lines first
//! (`flexsys::prefetch::at`), or with one `pread` per part; then with other
//! work before each read (a CRC of 16 KiB), without hints and with the next
//! read's lines asked for before the work.
//!
//! Invariant: the file is made in the given directory (default: a new
//! temporary directory in the current one) and removed at the end; the
//! mapping is read-only and lives no longer than the file handle.

use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::time::Instant;

/// Parts of one read.
const PARTS: usize = 6;
/// Bytes of each part.
const PART: usize = 300;

/// Arguments of `flexbench diag scattered-copy`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// MiB of the file.
    #[arg(long, default_value_t = 4096)]
    mib: usize,
    /// Reads per mode and round.
    #[arg(long, default_value_t = 200_000)]
    reads: usize,
    /// Rounds over all modes.
    #[arg(long, default_value_t = 4)]
    rounds: usize,
    /// Directory for the file (default: a temporary directory).
    #[arg(long)]
    dir: Option<PathBuf>,
}

/// Runs the diagnostic.
pub fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let tmp = tempfile::tempdir_in(".")?;
    let dir = args.dir.clone().unwrap_or_else(|| tmp.path().to_path_buf());
    let path = dir.join("scattered_copy.data");
    let result = measure(args, &path);
    let _ = std::fs::remove_file(&path);
    result
}

/// Makes the file, maps it and times the modes.
fn measure(args: &Args, path: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
    let mib = args.mib.max(1);
    let size = mib << 20;
    let mut file = std::fs::File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)?;
    let block = vec![1u8; 1 << 20];
    for _ in 0..mib {
        file.write_all(&block)?;
    }
    file.sync_all()?;
    // SAFETY: a read-only shared mapping of a file this function created,
    // holds open and removes only after the mapping is dropped; nothing
    // else writes or truncates the file while it is mapped.
    let map = unsafe { memmap2::Mmap::map(&file)? };
    let bytes: &[u8] = &map;
    // Every page mapped once, as in a store whose data file has been read.
    let mut sink = 0u64;
    for page in bytes.chunks(4096) {
        sink = sink.wrapping_add(u64::from(page[0]));
    }
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % (size - PART) as u64) as usize
    };
    let mut out = vec![0u8; PARTS * PART];
    let work = vec![3u8; 16 << 10];
    let modes = [
        ("copies", 0),
        ("prefetched copies", 1),
        ("pread", 2),
        ("work, copies", 3),
        ("hint, work, copies", 4),
    ];
    let reads = args.reads.max(1);
    for round in 0..args.rounds {
        for (name, mode) in modes {
            let t = Instant::now();
            let mut ahead: [usize; PARTS] = std::array::from_fn(|_| next());
            for _ in 0..reads {
                let at = ahead;
                ahead = std::array::from_fn(|_| next());
                if mode == 4 {
                    for &a in &ahead {
                        flexsys::prefetch::at(bytes[a..].as_ptr(), PART);
                    }
                }
                if mode >= 3 {
                    sink = sink.wrapping_add(u64::from(crc32c::crc32c(&work)));
                }
                if mode == 1 {
                    for &a in &at {
                        flexsys::prefetch::at(bytes[a..].as_ptr(), PART);
                    }
                }
                for (k, &a) in at.iter().enumerate() {
                    let dst = &mut out[k * PART..(k + 1) * PART];
                    if mode == 2 {
                        file.read_exact_at(dst, a as u64)?;
                    } else {
                        dst.copy_from_slice(&bytes[a..a + PART]);
                    }
                }
                sink = sink.wrapping_add(u64::from(out[7]));
            }
            let us = t.elapsed().as_secs_f64() / reads as f64 * 1e6;
            println!("round {round}: {name:>18}: {us:.2} us per read of {PARTS} parts");
        }
    }
    std::hint::black_box(sink);
    Ok(())
}
