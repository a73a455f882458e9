//! Credential refresh timing, a pure core: how usable a credential obtained at one moment and
//! expiring at another is at a third. No clock is read here; every time is an argument.

use std::time::{Duration, SystemTime};

/// How usable a cached credential is at some moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Freshness {
    /// Use it.
    Fresh,
    /// Still valid, but in the final tenth of its lifetime: the next request refreshes it.
    Refreshable,
    /// Expired: must be looked up again.
    Expired,
}

/// The refresh margin of a credential obtained at `obtained` that expires at `expires`: a
/// tenth of its lifetime, bounded to 1–60 s.
pub(crate) fn refresh_margin(obtained: SystemTime, expires: SystemTime) -> Duration {
    let lifetime = expires.duration_since(obtained).unwrap_or(Duration::ZERO);
    (lifetime / 10).clamp(Duration::from_secs(1), Duration::from_secs(60))
}

/// Whether a credential obtained at `obtained` and expiring at `expires` (never, if `None`) is
/// fresh at `now`.
pub(crate) fn freshness(
    obtained: SystemTime,
    expires: Option<SystemTime>,
    now: SystemTime,
) -> Freshness {
    let Some(expires) = expires else {
        return Freshness::Fresh;
    };
    if now >= expires {
        return Freshness::Expired;
    }
    let margin = refresh_margin(obtained, expires);
    match expires.checked_sub(margin) {
        Some(refresh_at) if now < refresh_at => Freshness::Fresh,
        _ => Freshness::Refreshable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn margin_is_a_tenth_bounded_to_one_and_sixty_seconds() {
        let t0 = SystemTime::UNIX_EPOCH;
        let s = Duration::from_secs;
        assert_eq!(refresh_margin(t0, t0 + s(100)), s(10));
        assert_eq!(refresh_margin(t0, t0 + s(3600)), s(60));
        assert_eq!(refresh_margin(t0, t0 + s(5)), s(1));
        assert_eq!(refresh_margin(t0, t0), s(1));
    }

    #[test]
    fn freshness_boundaries() {
        let t0 = SystemTime::UNIX_EPOCH;
        let s = Duration::from_secs;
        let exp = Some(t0 + s(100));
        assert_eq!(freshness(t0, exp, t0 + s(89)), Freshness::Fresh);
        assert_eq!(freshness(t0, exp, t0 + s(90)), Freshness::Refreshable);
        assert_eq!(freshness(t0, exp, t0 + s(99)), Freshness::Refreshable);
        assert_eq!(freshness(t0, exp, t0 + s(100)), Freshness::Expired);
        assert_eq!(freshness(t0, None, t0 + s(1_000_000)), Freshness::Fresh);
        // One hour: the margin is capped at 60 s.
        let hour = Some(t0 + s(3600));
        assert_eq!(freshness(t0, hour, t0 + s(3539)), Freshness::Fresh);
        assert_eq!(freshness(t0, hour, t0 + s(3540)), Freshness::Refreshable);
    }
}
