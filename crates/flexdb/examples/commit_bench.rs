//! Times the write path and the committer alone, without the YCSB harness:
//! loads N udb-sized pairs (27-byte keys, 127-byte values) in a scrambled
//! order, flushes, then overwrites N/4 random keys and flushes again.
//! Usage: `cargo run --release -p flexdb --example commit_bench -- N DIR`
//! (`MT=bytes` sets the MemTable size; `FLEXDB_TRACE=1` prints per-commit
//! timings). DESIGN.md quotes its figures; the directory is removed first.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
use std::time::Instant;
fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let dir = std::path::PathBuf::from(std::env::args().nth(2).unwrap_or("/work/tmp/cb".into()));
    let _ = std::fs::remove_dir_all(&dir);
    let db = flexdb::Db::open(
        &dir,
        flexdb::Options::new()
            .create_if_missing(true)
            .cache_bytes(1 << 30)
            .memtable_bytes(
                std::env::var("MT")
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(64 << 20),
            ),
    )
    .unwrap();
    let key = |i: u64| {
        format!(
            "user{:023}",
            i.wrapping_mul(0x9E3779B97F4A7C15) % 10_000_000_000_000_000
        )
    };
    let val = vec![7u8; 127];
    let t = Instant::now();
    for i in 0..n {
        db.put(key(i), &val).unwrap();
    }
    let tw = t.elapsed();
    db.flush().unwrap();
    eprintln!(
        "load {n}: writes {:?}, total {:?} ({:.3} Mops/s)",
        tw,
        t.elapsed(),
        n as f64 / t.elapsed().as_secs_f64() / 1e6
    );
    let t = Instant::now();
    let m = n / 4;
    let mut x = 12345u64;
    for _ in 0..m {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        db.put(key(x % n), &val).unwrap();
    }
    let tw = t.elapsed();
    db.flush().unwrap();
    eprintln!(
        "update {m}: writes {:?}, total {:?} ({:.3} Mops/s)",
        tw,
        t.elapsed(),
        m as f64 / t.elapsed().as_secs_f64() / 1e6
    );
    let s = db.stats();
    eprintln!("{s:?}");
}
