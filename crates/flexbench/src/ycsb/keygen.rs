//! Keys, values, load order and the fast random numbers of `flexbench ycsb`.
//!
//! Invariants:
//! - Key `i` is `"user"` followed by `i` in decimal, zero-padded to the
//!   dataset's key size, so byte order of keys is numeric order of indexes
//!   and every key of a dataset has the same size.
//! - [`Permutation`] is a bijection of `0..n` (a keyed Feistel network over
//!   the next power of four, cycle-walked into range): a random load order
//!   that holds no table.
//! - Everything is a pure function of its seed: every engine sees the same
//!   keys, values and order.

/// Key and value sizes of a dataset (Table 3 of the FlexSpace paper).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dataset {
    /// Name on the command line.
    pub name: &'static str,
    /// Bytes per key.
    pub key_size: usize,
    /// Bytes per value.
    pub value_size: usize,
}

/// The datasets `--dataset` accepts.
pub const DATASETS: [Dataset; 3] = [
    Dataset {
        name: "zippydb",
        key_size: 48,
        value_size: 43,
    },
    Dataset {
        name: "udb",
        key_size: 27,
        value_size: 127,
    },
    Dataset {
        name: "sys",
        key_size: 28,
        value_size: 396,
    },
];

impl Dataset {
    /// The dataset named `name`.
    pub fn parse(name: &str) -> Result<Dataset, String> {
        DATASETS
            .iter()
            .find(|d| d.name.eq_ignore_ascii_case(name))
            .copied()
            .ok_or_else(|| {
                let names: Vec<_> = DATASETS.iter().map(|d| d.name).collect();
                format!(
                    "unknown dataset '{name}' (expected one of {})",
                    names.join(", ")
                )
            })
    }

    /// Bytes of one pair (key + value).
    pub fn pair_bytes(&self) -> u64 {
        (self.key_size + self.value_size) as u64
    }
}

/// The key prefix.
pub const KEY_PREFIX: &[u8] = b"user";

/// Formats key indexes as fixed-size keys.
#[derive(Clone, Copy, Debug)]
pub struct KeyFormat {
    key_size: usize,
}

impl KeyFormat {
    /// A format for `key_size`-byte keys holding indexes below `max_index`.
    pub fn new(key_size: usize, max_index: u64) -> Result<KeyFormat, String> {
        let digits = decimal_digits(max_index.saturating_sub(1));
        if key_size < KEY_PREFIX.len() + digits {
            return Err(format!(
                "keys of {key_size} bytes cannot hold {max_index} distinct indexes"
            ));
        }
        Ok(KeyFormat { key_size })
    }

    /// Bytes per key.
    pub fn key_size(&self) -> usize {
        self.key_size
    }

    /// Writes key `index` into `out` (which is resized to the key size).
    pub fn write(&self, index: u64, out: &mut Vec<u8>) {
        out.clear();
        out.resize(self.key_size, b'0');
        out[..KEY_PREFIX.len()].copy_from_slice(KEY_PREFIX);
        let mut i = self.key_size;
        let mut v = index;
        while v > 0 && i > KEY_PREFIX.len() {
            i -= 1;
            out[i] = b'0' + (v % 10) as u8;
            v /= 10;
        }
    }

    /// The key of `index` as a new vector.
    #[cfg(test)]
    pub fn key(&self, index: u64) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.key_size);
        self.write(index, &mut v);
        v
    }

    /// The index of a key written by [`KeyFormat::write`].
    #[cfg(test)]
    pub fn parse(&self, key: &[u8]) -> Option<u64> {
        let digits = key.strip_prefix(KEY_PREFIX)?;
        let mut v = 0u64;
        for &d in digits {
            if !d.is_ascii_digit() {
                return None;
            }
            v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
        }
        Some(v)
    }
}

/// Number of decimal digits of `v` (1 for 0).
pub fn decimal_digits(v: u64) -> usize {
    let mut d = 1;
    let mut x = v;
    while x >= 10 {
        x /= 10;
        d += 1;
    }
    d
}

/// SplitMix64's finaliser: a fast, well-mixing bijection of u64.
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A small, fast generator (SplitMix64); not for cryptography.
#[derive(Clone, Debug)]
pub struct FastRng {
    state: u64,
}

impl FastRng {
    /// A generator seeded from `seed`.
    pub fn new(seed: u64) -> FastRng {
        FastRng {
            state: mix64(seed ^ 0x6a09_e667_f3bc_c908),
        }
    }

    /// A generator for stream `stream` of `seed` (threads, phases).
    pub fn stream(seed: u64, stream: u64) -> FastRng {
        FastRng::new(mix64(seed).wrapping_add(mix64(stream.wrapping_add(0x1234_5678))))
    }

    /// The next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix64(self.state)
    }

    /// Uniform in `[0, 1)`.
    #[inline]
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in `0..n` (0 when `n` is 0), by multiply-shift.
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}

/// A keyed bijection of `0..n`: the random load order.
#[derive(Clone, Debug)]
pub struct Permutation {
    n: u64,
    half_bits: u32,
    keys: [u64; 4],
}

impl Permutation {
    /// A permutation of `0..n` chosen by `seed`.
    pub fn new(n: u64, seed: u64) -> Permutation {
        let bits = 64 - n.saturating_sub(1).leading_zeros();
        let half_bits = bits.div_ceil(2).max(1);
        let mut rng = FastRng::stream(seed, 0x0fe1_57e1);
        let keys = [
            rng.next_u64(),
            rng.next_u64(),
            rng.next_u64(),
            rng.next_u64(),
        ];
        Permutation { n, half_bits, keys }
    }

    fn feistel(&self, x: u64) -> u64 {
        let mask = (1u64 << self.half_bits) - 1;
        let mut l = x >> self.half_bits;
        let mut r = x & mask;
        for k in self.keys {
            let f = mix64(r ^ k) & mask;
            (l, r) = (r, l ^ f);
        }
        (l << self.half_bits) | r
    }

    /// The image of `i < n`.
    pub fn get(&self, i: u64) -> u64 {
        debug_assert!(i < self.n);
        // The domain is at most 4n, so cycle walking ends after a few steps
        // on average; every step stays inside the domain.
        let mut x = self.feistel(i);
        while x >= self.n {
            x = self.feistel(x);
        }
        x
    }
}

/// Random values: slices of a pool of random bytes at random offsets, so
/// producing one costs a random number and no fill.
///
/// The pool is small enough to stay in a core's cache while the engine
/// streams gigabytes past it: a value a client hands over should cost the
/// engine's copy, not a cache miss of the harness's own. (At 1 MiB, a
/// profile of the put phase at 10 M pairs put 13.9% of the clients'
/// samples in the engine's first copy of the value, a miss on the pool;
/// at 32 KiB, 1.5%: docs/BENCHMARKS.md.) Values still differ: 32 K
/// offsets give that many distinct values, so a put almost never writes
/// the value a key already holds.
pub struct ValuePool {
    pool: Vec<u8>,
    size: usize,
}

/// Bytes in a value pool beyond one value.
const POOL_BYTES: usize = 32 << 10;

impl ValuePool {
    /// A pool of `size`-byte values drawn from `seed`.
    pub fn new(size: usize, seed: u64) -> ValuePool {
        let mut rng = FastRng::stream(seed, 0x7a1e);
        let mut pool = Vec::with_capacity(POOL_BYTES + size + 8);
        while pool.len() < POOL_BYTES + size {
            pool.extend_from_slice(&rng.next_u64().to_le_bytes());
        }
        ValuePool { pool, size }
    }

    /// A value chosen by `rng`.
    #[inline]
    pub fn value(&self, rng: &mut FastRng) -> &[u8] {
        let at = rng.below(POOL_BYTES as u64) as usize;
        &self.pool[at..at + self.size]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_have_the_dataset_size_and_sort_numerically() {
        for d in DATASETS {
            let f = KeyFormat::new(d.key_size, 10_000_000_000).unwrap();
            let mut prev = Vec::new();
            for i in [0u64, 1, 9, 10, 11, 99, 100, 12345, 9_999_999_999] {
                let k = f.key(i);
                assert_eq!(k.len(), d.key_size);
                assert!(k.starts_with(b"user"));
                assert!(k > prev, "key {i} sorts after the previous");
                assert_eq!(f.parse(&k), Some(i));
                prev = k;
            }
        }
        assert_eq!(
            KeyFormat::new(27, 10).unwrap().key(42),
            b"user00000000000000000000042"
        );
        assert!(KeyFormat::new(6, 1000).is_err());
        assert!(KeyFormat::new(7, 1000).is_ok());
    }

    #[test]
    fn datasets_parse() {
        assert_eq!(Dataset::parse("UDB").unwrap().key_size, 27);
        assert_eq!(Dataset::parse("zippydb").unwrap().pair_bytes(), 91);
        assert_eq!(Dataset::parse("sys").unwrap().value_size, 396);
        assert!(Dataset::parse("nope").is_err());
    }

    #[test]
    fn permutation_is_a_bijection() {
        for n in [1u64, 2, 3, 7, 64, 1000, 4097, 100_003] {
            let p = Permutation::new(n, 7);
            let mut seen = vec![false; n as usize];
            for i in 0..n {
                let x = p.get(i);
                assert!(x < n);
                assert!(!seen[x as usize], "n={n}: {x} twice");
                seen[x as usize] = true;
            }
        }
    }

    #[test]
    fn permutation_shuffles_and_depends_on_the_seed() {
        let n = 10_000;
        let a = Permutation::new(n, 1);
        let b = Permutation::new(n, 2);
        let fixed = (0..n).filter(|&i| a.get(i) == i).count();
        assert!(fixed < 20, "{fixed} fixed points");
        let same = (0..n).filter(|&i| a.get(i) == b.get(i)).count();
        assert!(same < 20);
        // Adjacent positions land far apart on average.
        let mean_gap: f64 = (1..n)
            .map(|i| (a.get(i) as f64 - a.get(i - 1) as f64).abs())
            .sum::<f64>()
            / (n - 1) as f64;
        assert!(mean_gap > n as f64 / 5.0, "mean gap {mean_gap}");
    }

    #[test]
    fn rng_below_is_in_range_and_roughly_uniform() {
        let mut r = FastRng::new(3);
        let mut counts = [0u32; 10];
        for _ in 0..100_000 {
            let v = r.below(10);
            counts[v as usize] += 1;
        }
        for c in counts {
            assert!((9_000..11_000).contains(&c), "{counts:?}");
        }
        assert_eq!(r.below(0), 0);
        let f = r.next_f64();
        assert!((0.0..1.0).contains(&f));
    }

    #[test]
    fn values_have_the_size_and_vary() {
        let p = ValuePool::new(127, 1);
        let mut r = FastRng::new(1);
        let a = p.value(&mut r).to_vec();
        let b = p.value(&mut r).to_vec();
        assert_eq!(a.len(), 127);
        assert_ne!(a, b);
    }
}
