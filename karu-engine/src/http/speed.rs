//! Low-speed protection: abort an exchange that transfers fewer than `limit` bytes per second
//! for `time` (`http.low_speed_limit`, `http.low_speed_time`; by default 1,024 B/s for 60 s).
//!
//! Pure: no clock reads and no sleeping. Time enters as `now` arguments (any monotonic
//! [`Instant`], so tests drive it with a simulated clock).
//!
//! The rule is a sliding window: at any instant `t` from `start + time` on, the exchange is too
//! slow when fewer than `limit × time` body bytes arrived in the last `time` (the arrivals in
//! `(t − time, t]`). A burst followed by silence is therefore aborted `time` into the silence,
//! and a steady trickle just above the limit never is. Bytes arriving at the very instant the
//! window would fall short still count.
//!
//! Call order for one exchange: [`LowSpeed::new`] when the request is sent (waiting for the
//! response head counts), [`LowSpeed::handle_bytes`] for every body chunk that arrives,
//! [`LowSpeed::poll_abort_at`] for when to look again if nothing more arrives, and
//! [`LowSpeed::is_too_slow`] when that time comes.
//!
//! Memory is bounded: arrivals are grouped in [`SLOTS`] slots per window, each remembered at
//! its latest arrival, and only the arrivals that still decide the abort time are kept. An
//! arrival is thereby counted as if it came at most one slot (`time / 64`) later than it did:
//! the abort is never earlier than the exact rule's, and is exact while arrivals are at least
//! a slot apart.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::sdk::time::instant_after;

/// Slots per window.
pub(crate) const SLOTS: u32 = 64;

/// The bytes that arrived in one slot, at the time of the latest of them.
#[derive(Debug, Clone, Copy)]
struct Arrival {
    slot: u64,
    at: Instant,
    bytes: u64,
}

/// The low-speed state of one exchange.
#[derive(Debug, Clone)]
pub(crate) struct LowSpeed {
    /// Bytes that must arrive in every window (`limit × time`, rounded up); 0 disables.
    min_bytes: u64,
    window: Duration,
    slot: Duration,
    started: Instant,
    /// The arrivals that still decide the abort time: the ones after the first hold fewer
    /// than `min_bytes` together.
    arrivals: VecDeque<Arrival>,
    /// The bytes of `arrivals`.
    sum: u64,
}

impl LowSpeed {
    /// The state of an exchange started at `now`: fewer than `limit` bytes per second over
    /// `time` aborts it. A `limit` or a `time` of 0 disables the rule.
    pub(crate) fn new(limit: u64, time: Duration, now: Instant) -> Self {
        let nanos = u128::from(limit) * time.as_nanos();
        let min_bytes = u64::try_from(nanos.div_ceil(1_000_000_000)).unwrap_or(u64::MAX);
        LowSpeed {
            min_bytes,
            window: time,
            slot: (time / SLOTS).max(Duration::from_nanos(1)),
            started: now,
            arrivals: VecDeque::new(),
            sum: 0,
        }
    }

    /// Whether the rule applies at all.
    pub(crate) fn enabled(&self) -> bool {
        self.min_bytes > 0
    }

    /// `n` body bytes arrived at `now`. Bytes arriving after the abort time are too late to
    /// change it.
    pub(crate) fn handle_bytes(&mut self, n: u64, now: Instant) {
        if n == 0 || self.poll_abort_at().is_none_or(|at| now > at) {
            return;
        }
        let slot = self.slot_of(now);
        match self.arrivals.back_mut() {
            Some(last) if last.slot == slot => {
                last.at = last.at.max(now);
                last.bytes = last.bytes.saturating_add(n);
            }
            _ => self.arrivals.push_back(Arrival {
                slot,
                at: now,
                bytes: n,
            }),
        }
        self.sum = self.sum.saturating_add(n);
        // The oldest arrival no longer matters once the newer ones alone are enough: they
        // leave the window after it.
        while let Some(first) = self.arrivals.front() {
            if self.sum - first.bytes < self.min_bytes {
                break;
            }
            self.sum -= first.bytes;
            self.arrivals.pop_front();
        }
    }

    /// When the exchange becomes too slow if no more bytes arrive; `None` when the rule is
    /// disabled.
    #[must_use]
    pub(crate) fn poll_abort_at(&self) -> Option<Instant> {
        if !self.enabled() {
            return None;
        }
        Some(match self.arrivals.front() {
            // Enough arrived: the window falls short when the first of them leaves it.
            Some(first) if self.sum >= self.min_bytes => instant_after(first.at, self.window),
            // Not enough has arrived since the start: the first full window falls short.
            _ => instant_after(self.started, self.window),
        })
    }

    /// Whether the exchange is too slow at `now`, given the bytes handled so far.
    #[must_use]
    pub(crate) fn is_too_slow(&self, now: Instant) -> bool {
        self.poll_abort_at().is_some_and(|at| now >= at)
    }

    fn slot_of(&self, now: Instant) -> u64 {
        let since = now.saturating_duration_since(self.started);
        u64::try_from(since.as_nanos() / self.slot.as_nanos()).unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const S: Duration = Duration::from_secs(1);

    /// The contract's rule (`karu-engine/README.md`, "Retries and the deadline"): 1,024 B/s
    /// for 60 s.
    fn default_rule(t0: Instant) -> LowSpeed {
        LowSpeed::new(1024, 60 * S, t0)
    }

    #[test]
    fn the_default_rule_needs_61440_bytes_in_every_60_seconds() {
        let t0 = Instant::now();
        let rule = default_rule(t0);
        assert_eq!(rule.min_bytes, 61_440);
        assert_eq!(rule.window, 60 * S);
        assert_eq!(rule.poll_abort_at(), Some(t0 + 60 * S));
        // Waiting for the response head counts: nothing at all for 60 s is too slow.
        assert!(!rule.is_too_slow(t0 + 60 * S - Duration::from_nanos(1)));
        assert!(rule.is_too_slow(t0 + 60 * S));
    }

    #[test]
    fn a_burst_then_silence_is_aborted_60_seconds_into_the_silence() {
        for burst_at in [1, 10, 30, 59, 60] {
            let t0 = Instant::now();
            let mut rule = default_rule(t0);
            let burst = t0 + burst_at * S;
            rule.handle_bytes(4 << 20, burst);
            // A window of fixed 60 s steps would wait for the end of the next whole window
            // (up to 120 s of silence); the sliding window ends 60 s after the burst.
            assert_eq!(
                rule.poll_abort_at(),
                Some(burst + 60 * S),
                "burst at {burst_at} s"
            );
            assert!(!rule.is_too_slow(burst + 60 * S - Duration::from_nanos(1)));
            assert!(rule.is_too_slow(burst + 60 * S));
        }
    }

    #[test]
    fn a_fast_transfer_that_stops_is_aborted_60_seconds_after_its_last_byte() {
        let t0 = Instant::now();
        let mut rule = default_rule(t0);
        // 64 KiB every 100 ms for 100 s, then nothing.
        for k in 1..=1000u32 {
            let at = t0 + k * S / 10;
            assert!(!rule.is_too_slow(at));
            rule.handle_bytes(64 << 10, at);
        }
        let last = t0 + 100 * S;
        assert_eq!(rule.poll_abort_at(), Some(last + 60 * S));
        assert!(rule.arrivals.len() <= SLOTS as usize + 2);
    }

    #[test]
    fn a_burst_in_the_first_window_still_waits_for_the_first_full_window() {
        // Not enough in the first window: aborted when it ends, 60 s after the start.
        let t0 = Instant::now();
        let mut rule = default_rule(t0);
        rule.handle_bytes(61_439, t0 + 10 * S);
        assert_eq!(rule.poll_abort_at(), Some(t0 + 60 * S));
        rule.handle_bytes(1, t0 + 11 * S);
        assert_eq!(rule.poll_abort_at(), Some(t0 + 70 * S));
    }

    /// Feeds `per_second` bytes every second for ten minutes, checking the rule half-way
    /// between arrivals and at each arrival (after it, as the driver sees a byte that arrives
    /// when its timer fires); returns when it first found the exchange too slow.
    fn steady_trickle(per_second: u64) -> Option<Duration> {
        let t0 = Instant::now();
        let mut rule = default_rule(t0);
        for k in 1..=600u32 {
            let at = t0 + k * S;
            if rule.is_too_slow(at - S / 2) {
                return Some(at - S / 2 - t0);
            }
            rule.handle_bytes(per_second, at);
            if rule.is_too_slow(at) {
                return Some(at - t0);
            }
            assert!(
                rule.arrivals.len() <= SLOTS as usize + 2,
                "{:?}",
                rule.arrivals.len()
            );
        }
        None
    }

    #[test]
    fn a_steady_trickle_just_above_the_limit_is_never_aborted() {
        assert_eq!(steady_trickle(1025), None);
        assert_eq!(steady_trickle(1024), None);
    }

    #[test]
    fn a_steady_trickle_just_below_the_limit_is_aborted_after_the_first_window() {
        // 60 arrivals of 1,023 bytes by t0 + 60 s: 61,380 < 61,440.
        assert_eq!(steady_trickle(1023), Some(60 * S));
    }

    #[test]
    fn a_limit_or_a_time_of_zero_disables_the_rule() {
        let t0 = Instant::now();
        for mut rule in [
            LowSpeed::new(0, 60 * S, t0),
            LowSpeed::new(1024, Duration::ZERO, t0),
        ] {
            assert!(!rule.enabled());
            assert_eq!(rule.poll_abort_at(), None);
            rule.handle_bytes(10, t0 + S);
            assert!(!rule.is_too_slow(t0 + 3600 * S));
            assert!(rule.arrivals.is_empty());
        }
    }

    #[test]
    fn bytes_after_the_abort_time_are_too_late() {
        let t0 = Instant::now();
        let mut rule = default_rule(t0);
        rule.handle_bytes(1 << 30, t0 + 60 * S + Duration::from_nanos(1));
        assert!(rule.is_too_slow(t0 + 60 * S));
        assert_eq!(rule.poll_abort_at(), Some(t0 + 60 * S));
        // At the abort time itself they still count.
        let mut rule = default_rule(t0);
        rule.handle_bytes(1 << 30, t0 + 60 * S);
        assert_eq!(rule.poll_abort_at(), Some(t0 + 120 * S));
    }

    #[test]
    fn huge_limits_saturate() {
        let t0 = Instant::now();
        let mut rule = LowSpeed::new(u64::MAX, 3600 * S, t0);
        assert_eq!(rule.min_bytes, u64::MAX);
        rule.handle_bytes(u64::MAX, t0 + S);
        // Another slot (3600 s / 64 = 56.25 s later).
        rule.handle_bytes(u64::MAX, t0 + 100 * S);
        assert_eq!(rule.poll_abort_at(), Some(t0 + 3601 * S));
    }

    /// The exact rule, with every arrival remembered: the first instant from `start + time`
    /// on at which fewer than `min_bytes` arrived in `(t − time, t]`. Candidates are the end
    /// of the first window and each arrival leaving the window.
    fn reference(min_bytes: u64, time: Duration, arrivals: &[(Duration, u64)]) -> Duration {
        let mut candidates: Vec<Duration> = arrivals.iter().map(|&(at, _)| at + time).collect();
        candidates.push(time);
        candidates.sort();
        for t in candidates.into_iter().filter(|&t| t >= time) {
            let window: u64 = arrivals
                .iter()
                .filter(|&&(at, _)| at <= t && at + time > t)
                .map(|&(_, n)| n)
                .sum();
            if window < min_bytes {
                return t;
            }
        }
        unreachable!("the last arrival's leaving empties the window")
    }

    /// Runs the core as the exchange driver does: did it become too slow before the next
    /// arrival? Returns when it aborts.
    fn driven(limit: u64, time: Duration, arrivals: &[(Duration, u64)]) -> Duration {
        let t0 = Instant::now();
        let mut rule = LowSpeed::new(limit, time, t0);
        for &(at, n) in arrivals {
            if rule.poll_abort_at().is_some_and(|abort| abort < t0 + at) {
                break;
            }
            rule.handle_bytes(n, t0 + at);
            assert!(rule.arrivals.len() <= SLOTS as usize + 2);
        }
        rule.poll_abort_at().expect("enabled") - t0
    }

    /// Arrivals in time order: gaps in milliseconds and sizes.
    fn schedule(min_gap_ms: u64) -> impl Strategy<Value = Vec<(Duration, u64)>> {
        prop::collection::vec((min_gap_ms..3000u64, 0u64..5000), 0..200).prop_map(|steps| {
            let mut at = Duration::ZERO;
            steps
                .into_iter()
                .map(|(gap, n)| {
                    at += Duration::from_millis(gap);
                    (at, n)
                })
                .collect()
        })
    }

    proptest! {
        #[test]
        fn never_aborts_before_the_exact_rule(
            limit in 1u64..2000,
            time_ms in 1u64..20_000,
            arrivals in schedule(1),
        ) {
            let time = Duration::from_millis(time_ms);
            let min_bytes = (limit * time_ms).div_ceil(1000);
            prop_assert!(driven(limit, time, &arrivals) >= reference(min_bytes, time, &arrivals));
        }

        #[test]
        fn is_exact_when_arrivals_are_a_slot_apart(
            limit in 1u64..2000,
            time_ms in 1u64..4_000,
            arrivals in schedule(63),
        ) {
            // Gaps of at least 63 ms exceed a slot (time / 64 < 62.5 ms).
            let time = Duration::from_millis(time_ms);
            let min_bytes = (limit * time_ms).div_ceil(1000);
            prop_assert_eq!(driven(limit, time, &arrivals), reference(min_bytes, time, &arrivals));
        }
    }
}
