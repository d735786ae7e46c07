//! Request distributions: YCSB's Zipfian generator (Gray et al., "Quickly
//! generating billion-record synthetic databases", as in YCSB's
//! `ZipfianGenerator`), the Zipfian-Composite distribution of the FlexSpace
//! paper (§6.3), YCSB's "latest" and the plain ones.
//!
//! Invariants:
//! - [`Zipf::next`] returns ranks in `0..n`; rank 0 is the most popular,
//!   with probability `1 / zeta(n, theta)`, rank r with `(r+1)^-theta /
//!   zeta(n, theta)`.
//! - `zeta(n)` is exact up to [`ZETA_EXACT`] terms and completed by the
//!   Euler-Maclaurin formula beyond (relative error below 1e-9), so
//!   building a generator for 10^9 keys costs milliseconds.
//! - Every chooser returns an index below the record count it was asked for.

use super::keygen::{decimal_digits, mix64, FastRng};

/// YCSB's Zipfian constant (the paper's alpha = 0.99).
pub const THETA: f64 = 0.99;

/// Terms of zeta summed exactly.
pub const ZETA_EXACT: u64 = 1 << 20;

fn zeta_range(from: u64, to: u64, theta: f64) -> f64 {
    // Sum i^-theta for i in from+1..=to, smallest terms first.
    let mut s = 0.0;
    let mut i = to;
    while i > from {
        s += (i as f64).powf(-theta);
        i -= 1;
    }
    s
}

/// `sum_{i=1..n} i^-theta`.
pub fn zeta(n: u64, theta: f64) -> f64 {
    if n <= ZETA_EXACT {
        return zeta_range(0, n, theta);
    }
    let m = ZETA_EXACT as f64;
    let x = n as f64;
    let f = |t: f64| t.powf(-theta);
    let df = |t: f64| -theta * t.powf(-theta - 1.0);
    let integral = (x.powf(1.0 - theta) - m.powf(1.0 - theta)) / (1.0 - theta);
    // sum_{i=m+1..n} f(i) = integral + (f(n) - f(m))/2 + (f'(n) - f'(m))/12 + ...
    zeta_range(0, ZETA_EXACT, theta) + integral + (f(x) - f(m)) / 2.0 + (df(x) - df(m)) / 12.0
}

/// Zipfian ranks over `0..n`.
#[derive(Clone, Debug)]
pub struct Zipf {
    n: u64,
    theta: f64,
    zetan: f64,
    zeta2: f64,
    alpha: f64,
    eta: f64,
}

impl Zipf {
    /// Ranks over `0..n` (`n >= 1`) with constant `theta` in (0, 1).
    pub fn new(n: u64, theta: f64) -> Zipf {
        let n = n.max(1);
        let zeta2 = zeta(2, theta);
        let mut z = Zipf {
            n,
            theta,
            zetan: zeta(n, theta),
            zeta2,
            alpha: 1.0 / (1.0 - theta),
            eta: 0.0,
        };
        z.eta = z.compute_eta();
        z
    }

    fn compute_eta(&self) -> f64 {
        (1.0 - (2.0 / self.n as f64).powf(1.0 - self.theta)) / (1.0 - self.zeta2 / self.zetan)
    }

    /// The item count.
    pub fn n(&self) -> u64 {
        self.n
    }

    /// Grows the item count to `n` (no-op if not larger), incrementally.
    pub fn grow_to(&mut self, n: u64) {
        if n <= self.n {
            return;
        }
        if n - self.n <= 4096 || n <= ZETA_EXACT {
            self.zetan += zeta_range(self.n, n, self.theta);
        } else {
            self.zetan = zeta(n, self.theta);
        }
        self.n = n;
        self.eta = self.compute_eta();
    }

    /// A rank in `0..n`.
    #[inline]
    pub fn next(&self, rng: &mut FastRng) -> u64 {
        let u = rng.next_f64();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return 1.min(self.n - 1);
        }
        let r = (self.n as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        r.min(self.n - 1)
    }
}

/// A request (key) distribution, as named on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Dist {
    /// Keys in order (load: key order; requests: each thread walks the keys
    /// from its own starting point).
    Seq,
    /// Uniform over the keys.
    Uniform,
    /// Zipfian (theta 0.99) by key index: key 0 is hottest and hot keys are
    /// neighbours in key order (as in the paper's microbenchmarks).
    Zipf,
    /// Zipfian ranks scattered over the key space by a hash (YCSB's
    /// `ScrambledZipfianGenerator`): hot keys are not neighbours.
    ZipfScrambled,
    /// The paper's Zipfian-Composite: the first three decimal digits of the
    /// key index are Zipfian, the remaining digits uniform.
    ZipfComposite,
    /// YCSB's "latest": Zipfian over recency, the newest insert hottest.
    Latest,
}

impl Dist {
    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Dist::Seq => "seq",
            Dist::Uniform => "uniform",
            Dist::Zipf => "zipf",
            Dist::ZipfScrambled => "zipf-scrambled",
            Dist::ZipfComposite => "zipf-composite",
            Dist::Latest => "latest",
        }
    }
}

/// Draws key indexes for one thread.
#[derive(Clone, Debug)]
pub enum KeyChooser {
    /// `next` then the following index, wrapping at `n`.
    Seq {
        /// The next index.
        next: u64,
        /// Key count.
        n: u64,
    },
    /// Uniform over `0..n`.
    Uniform {
        /// Key count.
        n: u64,
    },
    /// Zipfian rank = key index.
    Zipf(Zipf),
    /// Zipfian rank hashed onto `0..n`.
    ZipfScrambled(Zipf),
    /// Zipfian prefix times `suffixes` plus a uniform suffix, below `n`.
    Composite {
        /// Prefix ranks.
        prefix: Zipf,
        /// Values of the uniform suffix (a power of ten).
        suffixes: u64,
        /// Key count.
        n: u64,
    },
    /// `count - 1 - zipf(count)` where count is the current record count.
    Latest(Zipf),
}

impl KeyChooser {
    /// A chooser over `n >= 1` keys; `start` places a `Seq` chooser.
    pub fn new(dist: Dist, n: u64, start: u64) -> KeyChooser {
        let n = n.max(1);
        match dist {
            Dist::Seq => KeyChooser::Seq { next: start % n, n },
            Dist::Uniform => KeyChooser::Uniform { n },
            Dist::Zipf => KeyChooser::Zipf(Zipf::new(n, THETA)),
            Dist::ZipfScrambled => KeyChooser::ZipfScrambled(Zipf::new(n, THETA)),
            Dist::ZipfComposite => {
                let (prefixes, suffixes) = composite_split(n);
                KeyChooser::Composite {
                    prefix: Zipf::new(prefixes, THETA),
                    suffixes,
                    n,
                }
            }
            Dist::Latest => KeyChooser::Latest(Zipf::new(n, THETA)),
        }
    }

    /// A key index below `count`, the current number of records (only
    /// `Latest` follows it; the others keep to the count they were built
    /// for, which never exceeds it).
    #[inline]
    pub fn next(&mut self, rng: &mut FastRng, count: u64) -> u64 {
        match self {
            KeyChooser::Seq { next, n } => {
                let v = *next;
                *next = if v + 1 >= *n { 0 } else { v + 1 };
                v
            }
            KeyChooser::Uniform { n } => rng.below(*n),
            KeyChooser::Zipf(z) => z.next(rng),
            KeyChooser::ZipfScrambled(z) => mix64(z.next(rng)) % z.n(),
            KeyChooser::Composite {
                prefix,
                suffixes,
                n,
            } => {
                for _ in 0..16 {
                    let v = prefix.next(rng) * *suffixes + rng.below(*suffixes);
                    if v < *n {
                        return v;
                    }
                }
                rng.below(*n)
            }
            KeyChooser::Latest(z) => {
                let count = count.max(1);
                z.grow_to(count);
                let r = z.next(rng).min(count - 1);
                count - 1 - r
            }
        }
    }
}

/// How the Zipfian-Composite distribution splits `0..n`: (prefix count,
/// suffix count), where the prefix is the first three of the decimal
/// digits of `n - 1` (fewer when it has fewer).
pub fn composite_split(n: u64) -> (u64, u64) {
    let digits = decimal_digits(n.saturating_sub(1).max(1));
    let suffix_digits = digits.saturating_sub(3) as u32;
    let suffixes = 10u64.pow(suffix_digits);
    (n.div_ceil(suffixes).max(1), suffixes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeta_approximation_matches_the_exact_sum() {
        for n in [ZETA_EXACT + 1, 3 * ZETA_EXACT + 17, 10_000_000] {
            let exact = zeta_range(0, n, THETA);
            let approx = zeta(n, THETA);
            assert!(
                ((exact - approx) / exact).abs() < 1e-9,
                "n={n}: {exact} vs {approx}"
            );
        }
    }

    #[test]
    fn zipf_frequencies_follow_the_law() {
        // theta = 0.99 over 1000 items: P(rank r) = (r+1)^-0.99 / zeta.
        let n = 1000;
        let z = Zipf::new(n, THETA);
        let zn = zeta(n, THETA);
        let mut rng = FastRng::new(11);
        let draws = 1_000_000;
        let mut counts = vec![0u64; n as usize];
        for _ in 0..draws {
            counts[z.next(&mut rng) as usize] += 1;
        }
        // The two head ranks are exact in Gray's method.
        for (r, &count) in counts.iter().enumerate().take(2) {
            let expect = ((r + 1) as f64).powf(-THETA) / zn * draws as f64;
            let got = count as f64;
            assert!(
                (got - expect).abs() / expect < 0.03,
                "rank {r}: {got} vs {expect}"
            );
        }
        // Beyond, the method is an approximation: check mass in bands.
        for (lo, hi) in [(2usize, 10usize), (10, 100), (100, 1000)] {
            let expect: f64 = (lo..hi)
                .map(|r| ((r + 1) as f64).powf(-THETA) / zn)
                .sum::<f64>()
                * draws as f64;
            let got: u64 = counts[lo..hi].iter().sum();
            assert!(
                (got as f64 - expect).abs() / expect < 0.10,
                "ranks {lo}..{hi}: {got} vs {expect}"
            );
        }
    }

    #[test]
    fn zipf_over_a_large_space_is_skewed_and_in_range() {
        let n = 10_000_000;
        let z = Zipf::new(n, THETA);
        let mut rng = FastRng::new(5);
        let mut top = 0;
        for _ in 0..100_000 {
            let r = z.next(&mut rng);
            assert!(r < n);
            if r < 1000 {
                top += 1;
            }
        }
        // P(rank < 1000) = zeta(1000)/zeta(10^7), about 0.44 at theta 0.99.
        let expect = zeta(1000, THETA) / zeta(n, THETA);
        let got = top as f64 / 100_000.0;
        assert!((got - expect).abs() < 0.03, "{got} vs {expect}");
    }

    #[test]
    fn composite_prefixes_are_zipfian_and_suffixes_uniform() {
        let n = 1_000_000; // indexes 0..999999: 6 digits, 1000 prefixes of 1000
        assert_eq!(composite_split(n), (1000, 1000));
        let mut c = KeyChooser::new(Dist::ZipfComposite, n, 0);
        let mut rng = FastRng::new(9);
        let draws = 400_000;
        let mut prefix0 = 0u64;
        let mut prefix1 = 0u64;
        let mut suffix_low_half = 0u64;
        let mut suffix_counts = [0u64; 10];
        for _ in 0..draws {
            let k = c.next(&mut rng, n);
            assert!(k < n);
            match k / 1000 {
                0 => prefix0 += 1,
                1 => prefix1 += 1,
                _ => {}
            }
            if k % 1000 < 500 {
                suffix_low_half += 1;
            }
            suffix_counts[(k % 10) as usize] += 1;
        }
        let zn = zeta(1000, THETA);
        let e0 = draws as f64 / zn;
        let e1 = draws as f64 * 2f64.powf(-THETA) / zn;
        assert!(
            ((prefix0 as f64) - e0).abs() / e0 < 0.05,
            "{prefix0} vs {e0}"
        );
        assert!(
            ((prefix1 as f64) - e1).abs() / e1 < 0.05,
            "{prefix1} vs {e1}"
        );
        let half = suffix_low_half as f64 / draws as f64;
        assert!((half - 0.5).abs() < 0.01, "{half}");
        for c in suffix_counts {
            let f = c as f64 / draws as f64;
            assert!((f - 0.1).abs() < 0.005, "{suffix_counts:?}");
        }
    }

    #[test]
    fn composite_split_handles_odd_sizes() {
        assert_eq!(composite_split(1), (1, 1));
        assert_eq!(composite_split(500), (500, 1));
        assert_eq!(composite_split(1000), (1000, 1));
        assert_eq!(composite_split(1001), (101, 10));
        assert_eq!(composite_split(10_000_000), (1000, 10_000));
        assert_eq!(composite_split(12_345_678), (124, 100_000));
        let mut c = KeyChooser::new(Dist::ZipfComposite, 1001, 0);
        let mut rng = FastRng::new(1);
        for _ in 0..10_000 {
            assert!(c.next(&mut rng, 1001) < 1001);
        }
    }

    #[test]
    fn latest_favours_the_newest_records_and_follows_inserts() {
        let mut c = KeyChooser::new(Dist::Latest, 1000, 0);
        let mut rng = FastRng::new(2);
        let mut newest = 0;
        for _ in 0..100_000 {
            let k = c.next(&mut rng, 1000);
            assert!(k < 1000);
            if k == 999 {
                newest += 1;
            }
        }
        let expect = 100_000.0 / zeta(1000, THETA);
        assert!(((newest as f64) - expect).abs() / expect < 0.05);
        // After inserts, the newest record is the hottest.
        let mut hits = 0;
        for _ in 0..10_000 {
            let k = c.next(&mut rng, 5000);
            assert!(k < 5000);
            if k == 4999 {
                hits += 1;
            }
        }
        assert!(hits > 1000, "{hits}");
    }

    #[test]
    fn seq_wraps_and_uniform_covers() {
        let mut s = KeyChooser::new(Dist::Seq, 3, 2);
        let mut rng = FastRng::new(0);
        let v: Vec<u64> = (0..5).map(|_| s.next(&mut rng, 3)).collect();
        assert_eq!(v, [2, 0, 1, 2, 0]);
        let mut u = KeyChooser::new(Dist::Uniform, 100, 0);
        let mut seen = [false; 100];
        for _ in 0..10_000 {
            seen[u.next(&mut rng, 100) as usize] = true;
        }
        assert!(seen.iter().all(|&b| b));
    }

    #[test]
    fn scrambled_spreads_the_hot_keys() {
        let n = 1_000_000;
        let mut c = KeyChooser::new(Dist::ZipfScrambled, n, 0);
        let mut rng = FastRng::new(4);
        let mut low = 0;
        for _ in 0..100_000 {
            let k = c.next(&mut rng, n);
            assert!(k < n);
            if k < n / 100 {
                low += 1;
            }
        }
        // Unscrambled, half the draws would land in the first 1%.
        assert!(low < 10_000, "{low}");
    }
}
