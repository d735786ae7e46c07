//! Times the committer's walk over a frozen MemTable (`MemTable::newest`):
//! inserts N udb-sized pairs (27-byte keys, 127-byte values) in a scrambled
//! order, then walks the newest version of every key in key order, five
//! times, reading a byte of each key and value as the committer would.
//! Usage: `cargo run --release -p flexdb --example newest_walk -- N`
//! (default 1.2 M, about what a 256 MiB MemTable holds). DESIGN.md quotes
//! its figures.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_200_000);
    let mem = flexdb::memtable::MemTable::new();
    let val = vec![7u8; 127];
    for i in 0..n {
        let k = format!(
            "user{:023}",
            i.wrapping_mul(0x9E3779B97F4A7C15) % 10_000_000_000_000_000
        );
        mem.insert(k.as_bytes(), i + 1, Some(&val));
    }
    // The first walk sorts the table; the timed ones only walk.
    let _ = mem.newest().count();
    for _ in 0..5 {
        let t = std::time::Instant::now();
        let mut s = 0usize;
        for e in mem.newest() {
            s += e.key[5] as usize + e.value.map_or(0, |v| v[100] as usize);
        }
        println!("walked {n} entries in {:?} (checksum {s})", t.elapsed());
    }
}
