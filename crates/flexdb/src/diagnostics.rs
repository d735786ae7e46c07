//! Measurements of internal structures, for `flexbench internals` (compiled
//! only with the `diagnostics` feature): the sparse index alone, and the
//! committer's walk over a MemTable's newest versions.
//!
//! Invariants: a measurement builds its own structures (no store, no file)
//! and never panics on the sizes it is given (zero pairs count as one); its
//! report holds every figure, and its `Display` prints the lines the
//! former `sparse_bench` and `newest_walk` examples printed.

use std::collections::BTreeSet;
use std::fmt;
use std::hint::black_box;
use std::time::{Duration, Instant};

use crate::index::sparse::{separator, IntervalMeta, NewInterval, SparseIndex};
use crate::threads::thread_cpu;
use crate::write::memtable::MemTable;

/// Timed rounds of finds; the best counts.
const ROUNDS: usize = 9;
/// Bytes a udb pair takes in an interval (key, value, headers).
const PAIR: u32 = 160;
/// Finds timed per round (fewer for an index of fewer pairs: four a pair).
const LOOKUPS: u64 = 1_000_000;
/// An interval of the grown index splits above this many pairs...
const SPLIT_PAIRS: u16 = 16;
/// ...into pieces of about this many, as the committer does.
const SPLIT_PIECE: usize = 12;

/// The shape of a sparse index: its intervals and the memory it holds.
#[derive(Clone, Debug, PartialEq)]
pub struct IndexShape {
    /// Intervals in the index.
    pub intervals: u64,
    /// Pairs per interval, on average.
    pub pairs_per_interval: f64,
    /// Bytes of memory per interval.
    pub bytes_per_interval: f64,
    /// Bytes of memory per pair.
    pub bytes_per_pair: f64,
}

/// What [`sparse_index`] measured.
#[derive(Clone, Debug, PartialEq)]
pub struct SparseIndexReport {
    /// Pairs loaded.
    pub pairs: u64,
    /// Bytes of each key.
    pub key_bytes: usize,
    /// Time to grow the index by the random-order load.
    pub grow_time: Duration,
    /// The index as the load grew it.
    pub grown: IndexShape,
    /// Time to build the same intervals in bulk (as recovery does).
    pub build_time: Duration,
    /// The index built in bulk.
    pub built: IndexShape,
    /// Nanoseconds of CPU time per `find` of a random loaded key, in the
    /// grown index (best of the rounds).
    pub find_random_grown_ns: f64,
    /// The same for keys of a hot set of a thousand, in the grown index.
    pub find_hot_grown_ns: f64,
    /// The same as `find_random_grown_ns`, in the built index.
    pub find_random_built_ns: f64,
    /// The same as `find_hot_grown_ns`, in the built index.
    pub find_hot_built_ns: f64,
    /// Timed rounds of finds (the best counts).
    pub rounds: usize,
}

impl fmt::Display for SparseIndexReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shape = |f: &mut fmt::Formatter<'_>, what: &str, s: &IndexShape| {
            writeln!(
                f,
                "{what}: {} intervals, {:.2} pairs/interval, {:.1} B/interval, {:.3} B/pair",
                s.intervals, s.pairs_per_interval, s.bytes_per_interval, s.bytes_per_pair
            )
        };
        writeln!(
            f,
            "grow: {} keys of {} bytes in {:.2} s",
            self.pairs,
            self.key_bytes,
            self.grow_time.as_secs_f64()
        )?;
        shape(f, "grown", &self.grown)?;
        writeln!(f, "build: {:.3} s", self.build_time.as_secs_f64())?;
        shape(f, "built", &self.built)?;
        write!(
            f,
            "find ns (CPU time, best of {}): random {:.1} / hot {:.1} (grown), random {:.1} / hot {:.1} (built)",
            self.rounds,
            self.find_random_grown_ns,
            self.find_hot_grown_ns,
            self.find_random_built_ns,
            self.find_hot_built_ns
        )
    }
}

/// What [`memtable_walk`] measured.
#[derive(Clone, Debug, PartialEq)]
pub struct MemTableWalkReport {
    /// Pairs inserted (and so entries walked).
    pub pairs: u64,
    /// The time of each timed walk (after a first, untimed one that sorts).
    pub walks: Vec<Duration>,
    /// A checksum of the bytes each walk read, so that the walk cannot be
    /// optimised away.
    pub checksums: Vec<usize>,
}

impl fmt::Display for MemTableWalkReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (t, s)) in self.walks.iter().zip(&self.checksums).enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "walked {} entries in {t:?} (checksum {s})", self.pairs)?;
        }
        Ok(())
    }
}

fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// YCSB key `i`, `width` bytes: `"user"` and the index zero-padded.
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
        meta: IntervalMeta {
            size,
            count,
            ..IntervalMeta::default()
        },
    }
}

/// Nanoseconds of CPU time per find of `keys` in `s`, best of `ROUNDS`:
/// the machine may be shared, and time spent descheduled is not the
/// index's.
fn time_finds(s: &SparseIndex, keys: &[Vec<u8>]) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..ROUNDS {
        let t = thread_cpu();
        let mut acc = 0u64;
        for k in keys {
            acc = acc.wrapping_add(black_box(s.find(k)).offset);
        }
        black_box(acc);
        best = best.min((thread_cpu() - t).as_nanos() as f64 / keys.len().max(1) as f64);
    }
    best
}

fn shape(s: &SparseIndex, pairs: u64) -> IndexShape {
    let mem = s.memory() as f64;
    let intervals = s.len();
    IndexShape {
        intervals,
        pairs_per_interval: pairs as f64 / intervals as f64,
        bytes_per_interval: mem / intervals as f64,
        bytes_per_pair: mem / pairs as f64,
    }
}

/// Builds a sparse index as a random-order load of `pairs` YCSB pairs with
/// `key_bytes`-byte keys would (keys `"user"` and the index zero-padded,
/// intervals split above 16 pairs into pieces of about 12, as the committer
/// does), then measures it: its memory per interval and per pair, the same
/// after a bulk build (recovery), and the CPU time of `find` on random
/// loaded keys and on a small hot set (best of several rounds). What
/// `examples/sparse_bench.rs` printed (27-byte keys for udb, 48 for
/// zippydb). Keys are made wide enough for `pairs`' digits.
pub fn sparse_index(pairs: u64, key_bytes: usize) -> SparseIndexReport {
    let n = pairs.max(1);
    let digits = n.to_string().len();
    let width = key_bytes.max(4 + digits);
    let mut s = SparseIndex::new();
    let mut loaded = BTreeSet::new();
    let t = Instant::now();
    for j in 0..n {
        // A bijection of 0..n: multiply by an odd number modulo the next
        // power of two, cycle-walking into range.
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
        if count <= SPLIT_PAIRS {
            s.resize(&f, size, count);
            continue;
        }
        let lo = index_of(width, &s.anchor(&f));
        let hi = s.next_anchor(&f).map_or(u64::MAX, |a| index_of(width, &a));
        let ids: Vec<u64> = loaded.range(lo..hi).copied().collect();
        debug_assert_eq!(ids.len(), usize::from(count));
        let parts = ids.len().div_ceil(SPLIT_PIECE).max(2);
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
    let grow_time = t.elapsed();
    let mut all = Vec::new();
    s.for_each(|a, _, m| all.push(interval(a.to_vec(), m.size, m.count)));
    let t = Instant::now();
    let built = SparseIndex::build(all);
    let build_time = t.elapsed();
    let lookups = LOOKUPS.min(n.saturating_mul(4));
    let random: Vec<Vec<u8>> = (0..lookups).map(|j| key(width, mix(j) % n)).collect();
    let hot: Vec<Vec<u8>> = (0..lookups)
        .map(|j| key(width, mix(j % 1000) % n))
        .collect();
    SparseIndexReport {
        pairs: n,
        key_bytes: width,
        grow_time,
        grown: shape(&s, n),
        build_time,
        built: shape(&built, n),
        find_random_grown_ns: time_finds(&s, &random),
        find_hot_grown_ns: time_finds(&s, &hot),
        find_random_built_ns: time_finds(&built, &random),
        find_hot_built_ns: time_finds(&built, &hot),
        rounds: ROUNDS,
    }
}

/// Inserts `pairs` udb-sized pairs (27-byte keys, 127-byte values) into a
/// MemTable in a scrambled order, then walks the newest version of every
/// key in key order (`MemTable::newest`, the committer's walk) five times,
/// reading a byte of each key and value as the committer would, and times
/// each walk (a first, untimed walk sorts the table). What
/// `examples/newest_walk.rs` printed (it defaulted to 1.2 M pairs, about
/// what a 256 MiB MemTable holds).
pub fn memtable_walk(pairs: u64) -> MemTableWalkReport {
    let mem = MemTable::new();
    let val = vec![7u8; 127];
    for i in 0..pairs {
        let k = format!(
            "user{:023}",
            i.wrapping_mul(0x9E3779B97F4A7C15) % 10_000_000_000_000_000
        );
        mem.insert(k.as_bytes(), i + 1, Some(&val));
    }
    // The first walk sorts the table; the timed ones only walk.
    black_box(mem.newest().count());
    let (mut walks, mut checksums) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        let t = Instant::now();
        let mut s = 0usize;
        for e in mem.newest() {
            s += e.key[5] as usize + e.value.map_or(0, |v| v[100] as usize);
        }
        walks.push(t.elapsed());
        checksums.push(s);
    }
    MemTableWalkReport {
        pairs,
        walks,
        checksums,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_sparse_index_is_measured() {
        let r = sparse_index(2000, 27);
        assert_eq!((r.pairs, r.key_bytes), (2000, 27));
        assert!(r.grown.intervals > 100, "{r}");
        assert_eq!(r.grown.intervals, r.built.intervals);
        assert!(r.find_random_grown_ns > 0.0 && r.find_hot_built_ns > 0.0);
        let text = r.to_string();
        assert!(
            text.starts_with("grow: 2000 keys of 27 bytes in "),
            "{text}"
        );
        assert_eq!(text.lines().count(), 5, "{text}");
        // Keys too short for the count are widened; no pairs count as one.
        assert_eq!(sparse_index(123, 3).key_bytes, 7);
        assert_eq!(sparse_index(0, 27).grown.intervals, 1);
    }

    #[test]
    fn a_small_memtable_walk_is_measured() {
        let r = memtable_walk(500);
        assert_eq!(r.walks.len(), 5);
        assert!(r.checksums.iter().all(|&s| s == r.checksums[0] && s > 0));
        let text = r.to_string();
        assert_eq!(text.lines().count(), 5);
        assert!(text.starts_with("walked 500 entries in "), "{text}");
    }
}
