//! The retry policy: what to do after a failed attempt, under one deadline.
//!
//! Pure: no clock reads, no sleeping, no randomness of its own. Time enters as `now`
//! arguments (any monotonic [`Instant`], so tests use a simulated one) and jitter comes from
//! an injected [`fastrand::Rng`], so every decision is reproducible.
//!
//! Call order for one logical read: [`RetryState::new`] when the read starts (the deadline
//! starts then and covers credential lookup, requests and waits), then after each failed
//! attempt [`RetryState::handle_failure`], which returns a [`Decision`]. The caller carries it
//! out: waits and tries again, goes back to request preparation or to a credential worker, or
//! fails with the last error. A credential exchange (a token endpoint, a metadata server) is
//! retried by the same rules, its budget started with [`RetryState::until`] so that it also
//! ends by the deadline of the read it serves.

use std::time::{Duration, Instant, SystemTime};

use karu_config::RetrySettings;

use crate::sdk::time::instant_after;

/// The retry budget of one logical read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RetryPolicy {
    /// Most attempts for retryable results.
    pub(crate) attempts: u32,
    /// Most attempts when name resolution or connecting fails.
    pub(crate) connect_attempts: u32,
    /// The monotonic deadline of the whole read.
    pub(crate) deadline: Duration,
    /// First wait, before jitter.
    pub(crate) initial_backoff: Duration,
    /// Longest wait before `Retry-After`.
    pub(crate) max_backoff: Duration,
}

impl From<&RetrySettings> for RetryPolicy {
    fn from(s: &RetrySettings) -> Self {
        RetryPolicy {
            attempts: s.attempts.max(1),
            connect_attempts: s.connect_attempts.max(1),
            deadline: s.deadline.0,
            initial_backoff: s.initial_backoff.0,
            max_backoff: s.max_backoff.0,
        }
    }
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy::from(&RetrySettings::default())
    }
}

/// What kind of failure an attempt ended with, decided from structured results (error kinds
/// and status codes), never from message text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum FailureClass {
    /// Name resolution failed, the connection was refused, or connecting timed out: counted
    /// against `connect_attempts` as well as `attempts`.
    Connect,
    /// Send or receive failed, the connection was reset or closed mid-body, a partial
    /// transfer, a low-speed abort, or a retryable TLS or HTTP/2 failure.
    Transport,
    /// An HTTP status the server may answer differently next time (408, 425, 429, 5xx).
    RetryableStatus(u16),
    /// Never retried: invalid address, denied access, failed precondition, malformed or
    /// transformed response, missing object, a certificate the client does not trust.
    Permanent,
    /// The backend says the request must be prepared again (e.g. a corrected region).
    Reprepare,
    /// The backend says the credential expired: refresh it and prepare again.
    Reauthenticate,
}

/// What to do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub(crate) enum Decision {
    /// Wait this long, then make another ordinary attempt.
    RetryAfter(Duration),
    /// Prepare the request again now (one-time correction, outside the attempt counter).
    Reprepare,
    /// Invalidate the scoped credential, obtain a new one, prepare again (one-time).
    Reauthenticate,
    /// Fail the read with the last error.
    Fail(FailReason),
}

/// Why the policy gave up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FailReason {
    /// The failure is not retryable.
    Permanent,
    /// The attempt budget (or the connect budget) is spent.
    AttemptsExhausted,
    /// Not enough of the deadline remains for another attempt.
    DeadlineExhausted,
    /// A correction was needed a second time.
    CorrectionRepeated,
}

/// A `Retry-After` value (RFC 9110 §10.2.3): delay seconds or an HTTP date.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RetryAfter {
    /// `Retry-After: 120`.
    Delay(Duration),
    /// `Retry-After: Fri, 31 Dec 1999 23:59:59 GMT`.
    Date(SystemTime),
}

impl RetryAfter {
    /// Parse a header value; `None` for anything malformed.
    pub(crate) fn parse(value: &str) -> Option<RetryAfter> {
        let v = value.trim();
        if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) {
            return v
                .parse()
                .ok()
                .map(|s| RetryAfter::Delay(Duration::from_secs(s)));
        }
        httpdate::parse_http_date(v).ok().map(RetryAfter::Date)
    }

    /// The wait it asks for, given the wall-clock time now (a date in the past means 0).
    pub(crate) fn wait(&self, wall_now: SystemTime) -> Duration {
        match *self {
            RetryAfter::Delay(d) => d,
            RetryAfter::Date(at) => at.duration_since(wall_now).unwrap_or(Duration::ZERO),
        }
    }
}

/// The retry bookkeeping of one logical read.
#[derive(Debug, Clone)]
pub(crate) struct RetryState {
    policy: RetryPolicy,
    deadline: Instant,
    attempts: u32,
    connect_failures: u32,
    failures: u32,
    reprepared: bool,
    reauthenticated: bool,
}

impl RetryState {
    /// Start the budget of a read at `now`.
    pub(crate) fn new(policy: RetryPolicy, now: Instant) -> Self {
        RetryState {
            policy,
            deadline: instant_after(now, policy.deadline),
            attempts: 0,
            connect_failures: 0,
            failures: 0,
            reprepared: false,
            reauthenticated: false,
        }
    }

    /// Start the budget of an exchange at `now` that must also end by `deadline` (the read's
    /// it serves, if any): the policy's deadline from now, or `deadline` if sooner.
    pub(crate) fn until(policy: RetryPolicy, now: Instant, deadline: Option<Instant>) -> Self {
        let mut state = RetryState::new(policy, now);
        if let Some(deadline) = deadline {
            state.deadline = state.deadline.min(deadline);
        }
        state
    }

    /// The read's monotonic deadline.
    pub(crate) fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Move the deadline `by` later: time the read spent queued for the concurrency limit
    /// again (after waiting for another request's location without a permit), which counts no
    /// more than the queue before a read starts.
    pub(crate) fn extend(&mut self, by: Duration) {
        self.deadline += by;
    }

    /// Record that an attempt is starting; returns its number (1-based).
    pub(crate) fn start_attempt(&mut self) -> u32 {
        self.attempts += 1;
        self.attempts
    }

    /// Whether the deadline has passed at `now`.
    pub(crate) fn expired(&self, now: Instant) -> bool {
        now >= self.deadline
    }

    /// Decide after a failed attempt.
    ///
    /// `last_attempt` is how long the failed attempt took: another attempt is only worth
    /// starting if the wait plus about that long still fits before the deadline.
    /// `retry_after` is the wait the server asked for (it can only lengthen ours).
    pub(crate) fn handle_failure(
        &mut self,
        class: FailureClass,
        retry_after: Option<Duration>,
        last_attempt: Duration,
        now: Instant,
        rng: &mut fastrand::Rng,
    ) -> Decision {
        match class {
            FailureClass::Permanent => return Decision::Fail(FailReason::Permanent),
            FailureClass::Reprepare => {
                return if self.reprepared {
                    Decision::Fail(FailReason::CorrectionRepeated)
                } else if self.expired(now) {
                    Decision::Fail(FailReason::DeadlineExhausted)
                } else {
                    self.reprepared = true;
                    // A correction is not an ordinary attempt.
                    self.attempts = self.attempts.saturating_sub(1);
                    Decision::Reprepare
                };
            }
            FailureClass::Reauthenticate => {
                return if self.reauthenticated {
                    Decision::Fail(FailReason::CorrectionRepeated)
                } else if self.expired(now) {
                    Decision::Fail(FailReason::DeadlineExhausted)
                } else {
                    self.reauthenticated = true;
                    self.attempts = self.attempts.saturating_sub(1);
                    Decision::Reauthenticate
                };
            }
            FailureClass::Connect => {
                self.connect_failures += 1;
                if self.connect_failures >= self.policy.connect_attempts {
                    return Decision::Fail(FailReason::AttemptsExhausted);
                }
            }
            FailureClass::Transport | FailureClass::RetryableStatus(_) => {}
        }
        if self.attempts >= self.policy.attempts {
            return Decision::Fail(FailReason::AttemptsExhausted);
        }
        self.failures += 1;
        let wait = self.backoff(rng).max(retry_after.unwrap_or(Duration::ZERO));
        match now
            .checked_add(wait)
            .and_then(|t| t.checked_add(last_attempt))
        {
            Some(next_end) if next_end < self.deadline => Decision::RetryAfter(wait),
            _ => Decision::Fail(FailReason::DeadlineExhausted),
        }
    }

    /// Exponential backoff with equal jitter: half the step is fixed, half random, so waits
    /// grow with each failure yet two clients never stay in lockstep.
    fn backoff(&self, rng: &mut fastrand::Rng) -> Duration {
        let exponent = self.failures.saturating_sub(1).min(30);
        let step = self
            .policy
            .initial_backoff
            .saturating_mul(1u32 << exponent)
            .min(self.policy.max_backoff);
        let half = step / 2;
        let jitter_nanos = u64::try_from(half.as_nanos()).unwrap_or(u64::MAX);
        half + Duration::from_nanos(rng.u64(0..=jitter_nanos))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> RetryPolicy {
        RetryPolicy {
            attempts: 8,
            connect_attempts: 3,
            deadline: Duration::from_secs(120),
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(15),
        }
    }

    /// Run attempts that all fail with `class`; returns the decisions.
    fn run(class: FailureClass, policy: RetryPolicy, seed: u64) -> Vec<Decision> {
        let mut now = Instant::now();
        let mut state = RetryState::new(policy, now);
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut decisions = Vec::new();
        loop {
            state.start_attempt();
            now += Duration::from_millis(10);
            let d = state.handle_failure(class, None, Duration::from_millis(10), now, &mut rng);
            decisions.push(d);
            match d {
                Decision::RetryAfter(w) => now += w,
                Decision::Reprepare | Decision::Reauthenticate => {}
                Decision::Fail(_) => return decisions,
            }
        }
    }

    #[test]
    fn the_default_policy_is_the_contracts() {
        assert_eq!(
            RetryPolicy::default(),
            RetryPolicy {
                attempts: 8,
                connect_attempts: 3,
                deadline: Duration::from_secs(120),
                initial_backoff: Duration::from_millis(100),
                max_backoff: Duration::from_secs(15),
            }
        );
    }

    #[test]
    fn eight_attempts_for_retryable_results() {
        for class in [FailureClass::Transport, FailureClass::RetryableStatus(503)] {
            let d = run(class, policy(), 1);
            assert_eq!(d.len(), 8, "{class:?}: {d:?}");
            assert!(d[..7].iter().all(|d| matches!(d, Decision::RetryAfter(_))));
            assert_eq!(d[7], Decision::Fail(FailReason::AttemptsExhausted));
        }
    }

    #[test]
    fn three_attempts_for_connection_failures() {
        let d = run(FailureClass::Connect, policy(), 1);
        assert_eq!(d.len(), 3, "{d:?}");
        assert_eq!(d[2], Decision::Fail(FailReason::AttemptsExhausted));
    }

    #[test]
    fn permanent_failures_return_at_once() {
        assert_eq!(
            run(FailureClass::Permanent, policy(), 1),
            vec![Decision::Fail(FailReason::Permanent)]
        );
    }

    #[test]
    fn waits_grow_within_jitter_bounds() {
        for seed in 0..50 {
            let d = run(FailureClass::Transport, policy(), seed);
            for (i, decision) in d.iter().enumerate() {
                if let Decision::RetryAfter(w) = decision {
                    let step =
                        Duration::from_millis(100 * (1u64 << i)).min(Duration::from_secs(15));
                    assert!(
                        *w >= step / 2 && *w <= step,
                        "seed {seed} wait {i}: {w:?} vs {step:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn waits_are_capped() {
        let p = RetryPolicy {
            attempts: 40,
            deadline: Duration::from_secs(100_000),
            ..policy()
        };
        let d = run(FailureClass::Transport, p, 3);
        for decision in &d {
            if let Decision::RetryAfter(w) = decision {
                assert!(*w <= Duration::from_secs(15));
            }
        }
    }

    #[test]
    fn same_seed_same_waits() {
        assert_eq!(
            run(FailureClass::Transport, policy(), 9),
            run(FailureClass::Transport, policy(), 9)
        );
    }

    #[test]
    fn retry_after_extends_but_never_shortens() {
        let now = Instant::now();
        let mut rng = fastrand::Rng::with_seed(1);
        let mut s = RetryState::new(policy(), now);
        s.start_attempt();
        let d = s.handle_failure(
            FailureClass::RetryableStatus(429),
            Some(Duration::from_secs(7)),
            Duration::ZERO,
            now,
            &mut rng,
        );
        assert_eq!(d, Decision::RetryAfter(Duration::from_secs(7)));
        s.start_attempt();
        let d = s.handle_failure(
            FailureClass::RetryableStatus(429),
            Some(Duration::ZERO),
            Duration::ZERO,
            now,
            &mut rng,
        );
        let Decision::RetryAfter(w) = d else {
            panic!("{d:?}")
        };
        assert!(w >= Duration::from_millis(100), "{w:?}");
    }

    #[test]
    fn retry_after_beyond_the_deadline_fails_now() {
        let now = Instant::now();
        let mut s = RetryState::new(policy(), now);
        s.start_attempt();
        let d = s.handle_failure(
            FailureClass::RetryableStatus(503),
            Some(Duration::from_secs(600)),
            Duration::ZERO,
            now,
            &mut fastrand::Rng::with_seed(1),
        );
        assert_eq!(d, Decision::Fail(FailReason::DeadlineExhausted));
    }

    #[test]
    fn deadline_needs_room_for_another_attempt() {
        let p = RetryPolicy {
            deadline: Duration::from_secs(2),
            ..policy()
        };
        let now = Instant::now();
        let mut s = RetryState::new(p, now);
        s.start_attempt();
        let mut rng = fastrand::Rng::with_seed(1);
        // The first attempt took 1.95 s: a wait of >= 50 ms plus ~1.95 s does not fit.
        let later = now + Duration::from_millis(1950);
        let d = s.handle_failure(
            FailureClass::Transport,
            None,
            Duration::from_millis(1950),
            later,
            &mut rng,
        );
        assert_eq!(d, Decision::Fail(FailReason::DeadlineExhausted));
        // A quick attempt leaves room.
        let mut s = RetryState::new(p, now);
        s.start_attempt();
        let d = s.handle_failure(
            FailureClass::Transport,
            None,
            Duration::from_millis(10),
            now + Duration::from_millis(10),
            &mut rng,
        );
        assert!(matches!(d, Decision::RetryAfter(_)), "{d:?}");
    }

    #[test]
    fn an_exchange_ends_by_the_reads_deadline_or_its_own_whichever_is_first() {
        let now = Instant::now();
        let soon = now + Duration::from_secs(2);
        assert_eq!(
            RetryState::until(policy(), now, Some(soon)).deadline(),
            soon
        );
        let own = now + Duration::from_secs(120);
        assert_eq!(RetryState::until(policy(), now, None).deadline(), own);
        let later = now + Duration::from_secs(600);
        assert_eq!(
            RetryState::until(policy(), now, Some(later)).deadline(),
            own
        );
        // Waits that no longer fit before the read's deadline end the exchange.
        let mut s = RetryState::until(policy(), now, Some(now + Duration::from_millis(150)));
        s.start_attempt();
        let d = s.handle_failure(
            FailureClass::RetryableStatus(503),
            None,
            Duration::from_millis(10),
            now + Duration::from_millis(10),
            &mut fastrand::Rng::with_seed(1),
        );
        assert!(matches!(d, Decision::RetryAfter(_)), "{d:?}");
        s.start_attempt();
        let d = s.handle_failure(
            FailureClass::RetryableStatus(503),
            None,
            Duration::from_millis(10),
            now + Duration::from_millis(80),
            &mut fastrand::Rng::with_seed(1),
        );
        assert_eq!(d, Decision::Fail(FailReason::DeadlineExhausted));
    }

    #[test]
    fn corrections_are_one_time_and_outside_the_counter() {
        let now = Instant::now();
        let mut rng = fastrand::Rng::with_seed(1);
        let p = RetryPolicy {
            attempts: 1,
            ..policy()
        };
        let mut s = RetryState::new(p, now);
        s.start_attempt();
        assert_eq!(
            s.handle_failure(FailureClass::Reprepare, None, Duration::ZERO, now, &mut rng),
            Decision::Reprepare
        );
        s.start_attempt();
        assert_eq!(
            s.handle_failure(
                FailureClass::Reauthenticate,
                None,
                Duration::ZERO,
                now,
                &mut rng
            ),
            Decision::Reauthenticate
        );
        s.start_attempt();
        assert_eq!(
            s.handle_failure(FailureClass::Reprepare, None, Duration::ZERO, now, &mut rng),
            Decision::Fail(FailReason::CorrectionRepeated)
        );
        let mut s2 = RetryState::new(p, now);
        s2.start_attempt();
        let _ = s2.handle_failure(
            FailureClass::Reauthenticate,
            None,
            Duration::ZERO,
            now,
            &mut rng,
        );
        s2.start_attempt();
        assert_eq!(
            s2.handle_failure(
                FailureClass::Reauthenticate,
                None,
                Duration::ZERO,
                now,
                &mut rng
            ),
            Decision::Fail(FailReason::CorrectionRepeated)
        );
        // Corrections never outlive the deadline.
        let mut s3 = RetryState::new(p, now);
        s3.start_attempt();
        let late = now + Duration::from_secs(121);
        assert_eq!(
            s3.handle_failure(
                FailureClass::Reprepare,
                None,
                Duration::ZERO,
                late,
                &mut rng
            ),
            Decision::Fail(FailReason::DeadlineExhausted)
        );
    }

    #[test]
    fn retry_after_parsing() {
        let base = SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_777);
        assert_eq!(
            RetryAfter::parse("120"),
            Some(RetryAfter::Delay(Duration::from_secs(120)))
        );
        let date = RetryAfter::parse("Sun, 06 Nov 1994 08:49:37 GMT").unwrap();
        assert_eq!(
            date.wait(base - Duration::from_secs(5)),
            Duration::from_secs(5)
        );
        assert_eq!(date.wait(base + Duration::from_secs(5)), Duration::ZERO);
        for bad in ["", "-1", "1.5", "soon", "120 s"] {
            assert_eq!(RetryAfter::parse(bad), None, "{bad:?}");
        }
    }
}
