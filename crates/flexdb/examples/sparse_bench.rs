//! Measures the sparse index alone, without the store: grows it as a
//! random-order load of N YCSB pairs would (keys `"user"` + the index
//! zero-padded, intervals split above 16 pairs into pieces of about 12, as
//! the committer does), then reports its memory per interval and per pair,
//! the same after a bulk `build` (recovery), and the time of `find` on
//! random loaded keys and on a small hot set (thread CPU time, best of
//! several rounds).
//! Usage: `cargo run --release -p flexdb --example sparse_bench -- N KEYBYTES`
//! (KEYBYTES 27 for udb, 48 for zippydb). DESIGN.md quotes its figures.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::collections::BTreeSet;
use std::hint::black_box;
use std::time::Instant;

use flexdb::sparse::{separator, Meta, NewInterval, SparseIndex};

/// Timed rounds of finds; the best counts.
const ROUNDS: usize = 9;

/// Bytes a udb pair takes in an interval (key, value, headers).
const PAIR: u32 = 160;

fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn key(width: usize, i: u64) -> Vec<u8> {
    format!("user{i:0w$}", w = width - 4).into_bytes()
}

/// The smallest key index whose key is at or above `anchor` (anchors are
/// prefixes of keys).
fn index_of(width: usize, anchor: &[u8]) -> u64 {
    if anchor.len() <= 4 {
        return 0;
    }
    let mut v = 0u64;
    for k in 4..width {
        let d = anchor.get(k).map_or(0, |b| u64::from(b - b'0'));
        v = v * 10 + d;
    }
    v
}

fn interval(anchor: Vec<u8>, size: u32, count: u16) -> NewInterval {
    NewInterval {
        anchor,
        meta: Meta {
            size,
            count,
            ..Meta::default()
        },
    }
}

/// CPU time of this thread in nanoseconds (Linux's schedstat): the machine
/// may be shared, and time spent descheduled is not the index's.
fn cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .expect("/proc/thread-self/schedstat")
}

fn time_finds(s: &SparseIndex, keys: &[Vec<u8>]) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..ROUNDS {
        let t = cpu_ns();
        let mut acc = 0u64;
        for k in keys {
            acc = acc.wrapping_add(black_box(s.find(k)).offset);
        }
        black_box(acc);
        best = best.min((cpu_ns() - t) as f64 / keys.len() as f64);
    }
    best
}

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let width: usize = std::env::args()
        .nth(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(27);
    let mut s = SparseIndex::new();
    let mut loaded = BTreeSet::new();
    let t = Instant::now();
    for j in 0..n {
        // A bijection of 0..n (n below 2^32 here): multiply by an odd number
        // modulo the next power of two, cycle-walking into range.
        let mask = n.next_power_of_two() - 1;
        let mut i = j;
        loop {
            i = i
                .wrapping_mul(0x9E37_79B9_7F4A_7C15 | 1)
                .wrapping_add(12345)
                & mask;
            if i < n {
                break;
            }
        }
        loaded.insert(i);
        let k = key(width, i);
        let f = s.find(&k);
        let m = s.meta(&f);
        let (size, count) = (m.size + PAIR, m.count + 1);
        if count <= 16 {
            s.resize(&f, size, count);
            continue;
        }
        let lo = index_of(width, &s.anchor(&f));
        let hi = s.next_anchor(&f).map_or(u64::MAX, |a| index_of(width, &a));
        let ids: Vec<u64> = loaded.range(lo..hi).copied().collect();
        assert_eq!(ids.len(), usize::from(count));
        let parts = ids.len().div_ceil(12).max(2);
        let per = ids.len().div_ceil(parts);
        s.resize(&f, size, 0);
        let mut new = Vec::new();
        for (p, chunk) in ids.chunks(per).enumerate() {
            let anchor = if p == 0 {
                Vec::new()
            } else {
                separator(&key(width, ids[p * per - 1]), &key(width, chunk[0]))
            };
            new.push(interval(
                anchor,
                PAIR * chunk.len() as u32,
                chunk.len() as u16,
            ));
        }
        s.split(&f, new);
    }
    let load = t.elapsed();
    let report = |what: &str, s: &SparseIndex| {
        let mem = s.memory() as f64;
        println!(
            "{what}: {} intervals, {:.2} pairs/interval, {:.1} B/interval, {:.3} B/pair",
            s.len(),
            n as f64 / s.len() as f64,
            mem / s.len() as f64,
            mem / n as f64
        );
    };
    println!(
        "grow: {n} keys of {width} bytes in {:.2} s",
        load.as_secs_f64()
    );
    report("grown", &s);
    let mut all = Vec::new();
    s.for_each(|a, _, m| all.push(interval(a.to_vec(), m.size, m.count)));
    let t = Instant::now();
    let built = SparseIndex::build(all);
    println!("build: {:.3} s", t.elapsed().as_secs_f64());
    report("built", &built);
    let random: Vec<Vec<u8>> = (0..1_000_000u64).map(|j| key(width, mix(j) % n)).collect();
    let hot: Vec<Vec<u8>> = (0..1_000_000u64)
        .map(|j| key(width, mix(j % 1000) % n))
        .collect();
    println!(
        "find ns (CPU time, best of {ROUNDS}): random {:.1} / hot {:.1} (grown), random {:.1} / hot {:.1} (built)",
        time_finds(&s, &random),
        time_finds(&s, &hot),
        time_finds(&built, &random),
        time_finds(&built, &hot)
    );
}
