//! Times what a read of a fragmented interval costs through the data file's
//! mapping: six copies of 300 bytes at random places of a large file whose
//! pages are all in the page cache and mapped (a 10 M-pair store's interval
//! spans about six extents), copied one after another, or after asking for
//! every part's cache lines first (`flextree::prefetch::at`; docs/DESIGN.md,
//! "Tried, not kept: the parts' lines asked for before the first copy"),
//! or with one `pread` per part; then with other work before each read (a
//! CRC of 16 KiB, 1.5–2 µs here), without hints and with the next read's
//! lines asked for before the work.
//! Usage: `cargo run --release -p flexspace --example scattered_copy -- MiB [DIR]`
//! (the file is made in DIR, default the system's temporary directory, and
//! removed at the end). Linux only.

#[cfg(target_os = "linux")]
fn main() {
    use std::io::Write;
    use std::os::unix::fs::FileExt;
    use std::os::unix::io::AsRawFd;
    use std::time::Instant;

    const PARTS: usize = 6;
    const PART: usize = 300;
    const READS: usize = 200_000;

    let mib: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(4096);
    let dir = std::env::args()
        .nth(2)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let path = dir.join("scattered_copy.data");
    let size = mib << 20;
    let mut file = std::fs::File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .expect("create the file");
    let block = vec![1u8; 1 << 20];
    for _ in 0..mib {
        file.write_all(&block).expect("write the file");
    }
    file.sync_all().expect("sync the file");
    // SAFETY: a new shared read-only mapping of a file we hold open, of its
    // whole length; unmapped at the end.
    let map = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            size,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        )
    };
    assert_ne!(map, libc::MAP_FAILED, "mmap");
    let base = map as *const u8;
    // SAFETY: the mapping covers `size` bytes of the file, which holds them.
    let bytes = unsafe { std::slice::from_raw_parts(base, size) };
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
    for round in 0..4 {
        for (name, mode) in modes {
            let t = Instant::now();
            let mut ahead: [usize; PARTS] = std::array::from_fn(|_| next());
            for _ in 0..READS {
                let at = ahead;
                ahead = std::array::from_fn(|_| next());
                if mode == 4 {
                    for &a in &ahead {
                        flextree::prefetch::at(bytes[a..].as_ptr(), PART);
                    }
                }
                if mode >= 3 {
                    sink = sink.wrapping_add(u64::from(crc32c::crc32c(&work)));
                }
                if mode == 1 {
                    for &a in &at {
                        flextree::prefetch::at(bytes[a..].as_ptr(), PART);
                    }
                }
                for (k, &a) in at.iter().enumerate() {
                    let dst = &mut out[k * PART..(k + 1) * PART];
                    if mode == 2 {
                        file.read_exact_at(dst, a as u64).expect("pread");
                    } else {
                        dst.copy_from_slice(&bytes[a..a + PART]);
                    }
                }
                sink = sink.wrapping_add(u64::from(out[7]));
            }
            let us = t.elapsed().as_secs_f64() / READS as f64 * 1e6;
            println!("round {round}: {name:>18}: {us:.2} us per read of {PARTS} parts");
        }
    }
    std::hint::black_box(sink);
    // SAFETY: unmaps exactly the mapping made above, which nothing uses
    // any more.
    unsafe { libc::munmap(map, size) };
    drop(file);
    let _ = std::fs::remove_file(&path);
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("scattered_copy runs on Linux only");
}
