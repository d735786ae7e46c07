//! Seeds and sizes of the randomized crash tests of every layer.
//!
//! A crash test draws its whole run (workloads, crash points, torn
//! writes) from one master seed. So that CI explores new crash points on
//! every run instead of replaying the same ones, the seed is random unless
//! `CRASH_SEED` fixes it, and a test that fails prints the seed that
//! reproduces it (when its [`TestSeed`] is dropped while the thread
//! panics). `CRASH_ITERATIONS` sets the crashes of every crash test (each
//! test's own default otherwise).
//!
//! Invariant: with `CRASH_SEED=s` a test draws the same run as the failed
//! one that printed `s` (given the same `CRASH_ITERATIONS`).

use std::hash::{BuildHasher, Hasher};

/// The master seed of one crash test; prints itself if the test fails.
#[derive(Debug)]
pub struct TestSeed {
    name: &'static str,
    seed: u64,
}

impl TestSeed {
    /// The seed of the test `name`: `CRASH_SEED` if set (decimal or
    /// `0x` hexadecimal), else a fresh random one.
    pub fn new(name: &'static str) -> TestSeed {
        let seed = std::env::var("CRASH_SEED")
            .ok()
            .and_then(|v| parse(&v))
            .unwrap_or_else(random_seed);
        TestSeed { name, seed }
    }

    /// The seed.
    pub fn get(&self) -> u64 {
        self.seed
    }
}

impl Drop for TestSeed {
    #[allow(clippy::print_stderr)]
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "{}: reproduce with CRASH_SEED={:#x} (and the same CRASH_ITERATIONS)",
                self.name, self.seed
            );
        }
    }
}

/// The crashes a crash test runs: `CRASH_ITERATIONS` if set, else
/// `default`.
pub fn iterations(default: u64) -> u64 {
    std::env::var("CRASH_ITERATIONS")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

fn parse(v: &str) -> Option<u64> {
    let v = v.trim();
    match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => v.parse().ok(),
    }
}

/// A seed from the process's random hashing keys and the clock.
fn random_seed() -> u64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    h.write_u128(now);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_parse_in_decimal_and_hex() {
        assert_eq!(parse("42"), Some(42));
        assert_eq!(parse(" 0x2a "), Some(42));
        assert_eq!(parse("0XFF"), Some(255));
        assert_eq!(parse("zz"), None);
    }

    #[test]
    fn random_seeds_differ() {
        assert_ne!(random_seed(), random_seed());
    }
}
