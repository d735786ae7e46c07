//! Time for expiry: deadlines are wall-clock instants, Unix time in
//! milliseconds, so that they survive a reopen (and a copy to another
//! machine with a set clock).
//!
//! Invariants: a deadline is never 0 (0 means "no deadline" in every
//! encoding); a pair with deadline `d` is expired at every time `t >= d`.
//! A read takes the time at most once, and only when it meets a pair with
//! a deadline ([`Now`]), so reads of pairs without one never call the
//! clock. The time comes from the system clock, or from a [`ManualClock`]
//! the store was opened with (tests, simulations). A system clock set back
//! makes pairs whose deadline passed but that are not yet removed visible
//! again until the clock passes their deadline once more.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::error::{Error, Result};

/// A clock a program sets by hand (`Options::clock`): the store's time is
/// what it was last set to, for tests of expiry that cannot wait.
///
/// ```
/// use std::time::Duration;
/// let clock = flexdb::ManualClock::new();
/// let t = clock.now_ms();
/// clock.advance(Duration::from_secs(2));
/// assert_eq!(clock.now_ms(), t + 2000);
/// ```
#[derive(Clone, Debug)]
pub struct ManualClock(Arc<AtomicU64>);

impl ManualClock {
    /// A clock set to the system clock's current time.
    pub fn new() -> Self {
        ManualClock(Arc::new(AtomicU64::new(system_ms())))
    }

    /// Its time, Unix milliseconds.
    pub fn now_ms(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }

    /// Moves it forward by `by`.
    pub fn advance(&self, by: Duration) {
        let ms = u64::try_from(by.as_millis()).unwrap_or(u64::MAX);
        let _ = self
            .0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |t| {
                Some(t.saturating_add(ms))
            });
    }

    /// Sets it to `ms` Unix milliseconds.
    pub fn set_ms(&self, ms: u64) {
        self.0.store(ms, Ordering::Release);
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        ManualClock::new()
    }
}

/// Unix milliseconds by the system clock (0 before 1970).
fn system_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The store's clock: the system's, or a manual one.
#[derive(Clone, Debug, Default)]
pub(crate) struct Clock(Option<ManualClock>);

impl Clock {
    /// The clock of a store opened with `manual` (`None`: the system's).
    pub fn new(manual: Option<ManualClock>) -> Self {
        Clock(manual)
    }

    /// Unix milliseconds now.
    pub fn now_ms(&self) -> u64 {
        match &self.0 {
            Some(m) => m.now_ms(),
            None => system_ms(),
        }
    }

    /// The deadline `ttl` from now, the TTL rounded up to the
    /// millisecond (a pair never lives shorter than asked); a TTL of zero,
    /// or one past what a deadline can hold, is refused.
    pub fn deadline(&self, ttl: Duration) -> Result<u64> {
        if ttl.is_zero() {
            return Err(Error::InvalidArgument(
                "a time to live of zero (a pair that never lives; delete it instead)".into(),
            ));
        }
        let ms = u64::try_from(ttl.as_nanos().div_ceil(1_000_000)).ok();
        // (A deadline is never 0: `ms` is at least 1.)
        ms.and_then(|ms| self.now_ms().checked_add(ms))
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "a time to live of {ttl:?} is past the last deadline a pair can have"
                ))
            })
    }
}

/// The time as one read sees it: taken from the clock the first time a
/// pair with a deadline asks, then kept (a read judges all its pairs at
/// one instant).
pub(crate) struct Now<'a> {
    clock: &'a Clock,
    ms: Cell<u64>,
}

impl<'a> Now<'a> {
    /// Not yet taken.
    pub fn new(clock: &'a Clock) -> Self {
        Now {
            clock,
            ms: Cell::new(0),
        }
    }

    /// Whether a pair with deadline `expires` (0: none) is expired.
    #[inline]
    pub fn expired(&self, expires: u64) -> bool {
        expires != 0 && expires <= self.ms()
    }

    /// The value of a version found with deadline `expires`, if it lives
    /// now (`None` for no version or an expired one).
    #[inline]
    pub fn live<'v>(&self, found: Option<(&'v [u8], u64)>) -> Option<&'v [u8]> {
        found.and_then(|(v, expires)| (!self.expired(expires)).then_some(v))
    }

    fn ms(&self) -> u64 {
        let mut t = self.ms.get();
        if t == 0 {
            t = self.clock.now_ms().max(1);
            self.ms.set(t);
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadlines_refuse_zero_and_overflow_and_round_up() {
        let manual = ManualClock::new();
        manual.set_ms(1000);
        let clock = Clock::new(Some(manual.clone()));
        assert!(clock.deadline(Duration::ZERO).is_err());
        assert!(clock.deadline(Duration::MAX).is_err());
        assert_eq!(clock.deadline(Duration::from_micros(10)).unwrap(), 1001);
        assert_eq!(clock.deadline(Duration::from_micros(1500)).unwrap(), 1002);
        assert_eq!(clock.deadline(Duration::from_secs(1)).unwrap(), 2000);
        manual.set_ms(u64::MAX - 5);
        assert!(clock.deadline(Duration::from_millis(10)).is_err());
        manual.set_ms(u64::MAX);
        assert!(clock.deadline(Duration::from_micros(10)).is_err());
        manual.set_ms(0);
        assert_eq!(clock.deadline(Duration::from_micros(10)).unwrap(), 1);
    }

    #[test]
    fn a_read_takes_the_time_once_and_only_for_deadlines() {
        let manual = ManualClock::new();
        manual.set_ms(500);
        let clock = Clock::new(Some(manual.clone()));
        let now = Now::new(&clock);
        assert!(!now.expired(0));
        assert_eq!(now.ms.get(), 0, "no deadline: no clock");
        assert!(now.expired(500));
        assert!(!now.expired(501));
        manual.set_ms(10_000);
        assert!(!now.expired(501), "one read, one instant");
        assert!(Now::new(&clock).expired(501));
    }
}
