//! A doorkeeper (TinyLFU's first stage): one bit per hash bucket, set on a
//! key's first miss, so that a cache admits a key on its second miss within
//! a window and keys read once do not push out keys read often. The row
//! cache keys it by the key's hash, the interval cache's admission by the
//! interval's offset.
//!
//! Invariants: `admit` answers true only if the bucket's bit was set since
//! the last clearing; the bits are cleared after about `window` misses
//! (counted one in `SAMPLE`, by hash, so that missing readers do not all
//! write one counter). A collision or a clearing only changes what is
//! admitted, never what a cache serves.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// One miss in this many (by hash) is counted towards the window.
const SAMPLE: u32 = 8;

/// See the module docs.
pub(crate) struct Doorkeeper {
    seen: Box<[AtomicU64]>,
    sampled: AtomicUsize,
    /// Sampled misses between clearings.
    window: usize,
}

impl Doorkeeper {
    /// A doorkeeper cleared every `window` misses or so, with two bits per
    /// miss of a window.
    pub fn new(window: usize) -> Doorkeeper {
        let window = window.max(64);
        let words = (window * 2).div_ceil(64);
        Doorkeeper {
            seen: (0..words).map(|_| AtomicU64::new(0)).collect(),
            sampled: AtomicUsize::new(0),
            window: (window / SAMPLE as usize).max(1),
        }
    }

    /// Whether `hash` missed before in this window (noting that it missed
    /// now).
    pub fn admit(&self, hash: u32) -> bool {
        if hash.is_multiple_of(SAMPLE)
            && self.sampled.fetch_add(1, Ordering::Relaxed) % self.window == self.window - 1
        {
            for w in self.seen.iter() {
                w.store(0, Ordering::Relaxed);
            }
        }
        let bit = (hash as usize).wrapping_mul(0x9E37_79B9) % (self.seen.len() * 64);
        let mask = 1u64 << (bit % 64);
        let word = &self.seen[bit / 64];
        if word.load(Ordering::Relaxed) & mask != 0 {
            return true;
        }
        word.fetch_or(mask, Ordering::Relaxed);
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admits_on_the_second_miss_and_forgets_after_a_window() {
        let d = Doorkeeper::new(1024);
        assert!(!d.admit(7));
        assert!(d.admit(7));
        assert!(!d.admit(8));
        // A window of sampled misses (hashes divisible by SAMPLE) clears
        // every bit.
        for h in 1..=2048u32 {
            d.admit(h * SAMPLE * 1000);
        }
        assert!(!d.admit(7), "remembered past its window");
    }
}
