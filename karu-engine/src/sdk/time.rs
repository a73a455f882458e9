//! Time: the wall clock the engine reads credential expiries by ([`Clock`], injectable so
//! tests run on a simulated one), and the point in time a wait after another, for waits of any
//! length.
//!
//! Configured durations (`retry.deadline`, `http.connect_timeout`, `http.low_speed_time`)
//! may be as long as `u64::MAX` seconds, and so may the lifetimes token servers announce
//! (`expires_in`). `Instant + Duration` and `SystemTime + Duration` panic past what the clock
//! can hold, so every deadline and expiry is made here instead: a wait longer than
//! [`FOREVER`] counts as [`FOREVER`], which no read, connection or credential outlives.

use std::fmt;
use std::time::{Duration, Instant, SystemTime};

/// A source of wall-clock time; the system clock in production, a simulated one in tests.
pub trait Clock: Send + Sync + fmt::Debug {
    /// The time now.
    fn now(&self) -> SystemTime;
}

/// The system clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// The longest wait Karu tells apart from "never": 100 years.
pub const FOREVER: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// `at + wait`, with a wait longer than [`FOREVER`] taken as [`FOREVER`].
pub(crate) fn instant_after(at: Instant, wait: Duration) -> Instant {
    // A monotonic clock 100 years from its start cannot happen; `at` itself is the only
    // answer that cannot overflow.
    at.checked_add(wait.min(FOREVER)).unwrap_or(at)
}

/// `at + wait` on the wall clock, with a wait longer than [`FOREVER`] taken as [`FOREVER`]:
/// an expiry a server announces as `expires_in` (from the time of the answer) or `expires_on`
/// (from the Unix epoch) that the clock cannot hold is 100 years away, not a panic.
pub fn system_time_after(at: SystemTime, wait: Duration) -> SystemTime {
    at.checked_add(wait.min(FOREVER)).unwrap_or(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: Duration = Duration::MAX;

    #[test]
    fn ordinary_waits_are_added_exactly() {
        let now = Instant::now();
        let wall = SystemTime::now();
        for wait in [
            Duration::ZERO,
            Duration::from_nanos(1),
            Duration::from_secs(30),
            FOREVER,
        ] {
            assert_eq!(instant_after(now, wait), now + wait);
            assert_eq!(system_time_after(wall, wait), wall + wait);
        }
    }

    #[test]
    fn waits_past_what_the_clock_holds_are_a_hundred_years() {
        let now = Instant::now();
        let wall = SystemTime::now();
        for wait in [
            FOREVER + Duration::from_nanos(1),
            Duration::from_secs(u64::MAX),
            MAX,
        ] {
            assert_eq!(instant_after(now, wait), now + FOREVER);
            assert_eq!(system_time_after(wall, wait), wall + FOREVER);
            assert_eq!(
                system_time_after(SystemTime::UNIX_EPOCH, wait),
                SystemTime::UNIX_EPOCH + FOREVER
            );
        }
    }
}
