//! The hedging policy of one endpoint (`[hedge]`): when a request still waiting for its
//! answer gets a duplicate, and whether the endpoint's budget and health allow one.
//!
//! Pure: no clock reads, no sleeping, no randomness. Time enters as durations measured by the
//! caller (a request's time to its answer's head, how long a request has waited), so tests
//! drive it with a simulated clock.
//!
//! Call order, per endpoint: [`Hedger::handle_sent`] for every ordinary request (each attempt:
//! it refills the budget); then one call per request that ended (duplicates included, winners
//! and losers of a race alike): [`Hedger::handle_answer`] with the time to the head of an
//! answer that passed the checks, [`Hedger::handle_failure`] for a request that failed in
//! transport or with a server error, [`Hedger::handle_lost`] with how long a request waited
//! before it was cancelled because another request of its race won. Per request,
//! [`Hedger::poll_wait`] says how long it may wait before a duplicate is due, and when it is,
//! [`Hedger::poll_hedge`] says whether one may be sent now (and pays for it).
//!
//! The rules:
//!
//! - **When** (`hedge.after`): a fixed duration, or `"auto"`: the 95th percentile of the time
//!   to the head over the endpoint's last [`WINDOW`] answers, at least [`MEDIAN_FACTOR`] times
//!   their median (a tight distribution's p95 is within noise of its median, and hedging the
//!   noise only doubles requests) and never below [`FLOOR`]; nothing is known before
//!   [`MIN_SAMPLES`] answers, and a waiting request asks again after [`FLOOR`]. A request that
//!   lost its race counts too, with the time it waited (at least its time to the head would
//!   have been), when that is not below the delay in force: an original overtaken by its
//!   duplicate was slower than the delay, and leaving it out would take the slowest requests
//!   out of the window whenever a duplicate beats them, so that the percentile falls, more
//!   requests are hedged, and it falls again. A duplicate overtaken by its original waited less
//!   than the delay: a bound that low says nothing of the tail, and is left out. A second
//!   duplicate is due when the first has waited as long, at most [`MAX_HEDGES`] per attempt
//!   (with a 2 % tail, one duplicate in fifty is slow too: the second bounds the read). A
//!   duplicate refused (below) is asked for again while its request waits: after
//!   [`AGAIN_BUDGET`] when the budget had no token or the endpoint's window no room (both come
//!   back within a few requests), after [`FLOOR`] when the endpoint is throttling or failing.
//! - **Budget** (`hedge.budget`): a token bucket. Every ordinary request adds the budget's
//!   share of a token, a duplicate takes a whole one, and the bucket holds at most [`BURST`]
//!   tokens and starts empty: the duplicates an endpoint was ever sent never exceed the budget's
//!   share of its ordinary requests, and never more than [`BURST`] of them in a row.
//! - **Health**: no duplicate while the endpoint is throttling (the caller says so: a `429` or
//!   `503` came within about a round trip of answers, see the endpoint's window), nor while any
//!   of its last [`HEALTH_MEMORY`] answers failed in transport or with a server error: a
//!   duplicate of a request to a failing endpoint only doubles the load of an outage.

use std::time::Duration;

use karu_config::{HedgeAfter, HedgeSettings, Share};

/// Answers whose times to the head the automatic delay is computed from.
pub(crate) const WINDOW: usize = 256;
/// Answers measured before the automatic delay is known.
pub(crate) const MIN_SAMPLES: usize = 16;
/// The shortest automatic delay; also how long a request waits before asking again while the
/// delay is unknown.
pub(crate) const FLOOR: Duration = Duration::from_millis(50);
/// The automatic delay is at least this many times the median time to the head.
pub(crate) const MEDIAN_FACTOR: f64 = 1.5;
/// How long a request whose duplicate found no token in the budget (or no room in the
/// endpoint's window) waits before asking again.
pub(crate) const AGAIN_BUDGET: Duration = Duration::from_millis(10);
/// The most duplicates of one attempt.
pub(crate) const MAX_HEDGES: u32 = 2;
/// The most tokens the budget's bucket holds: duplicates that may go out in a row.
pub(crate) const BURST: u64 = 16;
/// The answers whose failures stop hedging.
pub(crate) const HEALTH_MEMORY: u32 = 16;
/// A token, in millionths.
const TOKEN: u64 = Share::WHOLE as u64;

/// The hedging settings of one read (a path rule may change them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HedgePolicy {
    /// Whether requests are hedged at all.
    pub(crate) enabled: bool,
    /// When a waiting request is hedged: after this long, or (`None`) automatically.
    pub(crate) after: Option<Duration>,
    /// The share of a token each ordinary request adds, in millionths.
    pub(crate) budget: u32,
}

impl From<&HedgeSettings> for HedgePolicy {
    fn from(s: &HedgeSettings) -> Self {
        HedgePolicy {
            enabled: s.enabled && s.budget.0 > 0,
            after: match s.after {
                HedgeAfter::After(after) => Some(after.0),
                _ => None,
            },
            budget: s.budget.0.min(Share::WHOLE),
        }
    }
}

/// How long a request may wait for its answer's head before a duplicate is due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub(crate) enum Wait {
    /// A duplicate is due once the request has waited this long (the `n`-th once the `n - 1`-th
    /// has waited as long).
    For(Duration),
    /// Too few answers measured: ask again after this long.
    Unknown(Duration),
    /// Never hedged (hedging is off).
    Never,
}

/// Whether a duplicate may be sent now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub(crate) enum Verdict {
    /// Send it: a token was taken.
    Send,
    /// Not now, for this reason.
    Refused(Refusal),
}

/// Why a duplicate was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Hedging is off.
    Disabled,
    /// The budget has no whole token.
    Budget,
    /// The endpoint is throttling.
    Throttling,
    /// Some of the endpoint's recent answers failed.
    Failing,
    /// The endpoint's window has no room (its requests in flight are as many as it allows).
    Window,
}

impl Refusal {
    /// How long a request whose duplicate was refused for this reason waits before asking
    /// again; `None`: it never asks again (hedging is off).
    pub(crate) fn again(self) -> Option<Duration> {
        match self {
            Refusal::Disabled => None,
            Refusal::Budget | Refusal::Window => Some(AGAIN_BUDGET),
            Refusal::Throttling | Refusal::Failing => Some(FLOOR),
        }
    }
}

/// The hedging state of one endpoint.
#[derive(Debug, Clone)]
pub(crate) struct Hedger {
    /// Times to the head, in microseconds, a ring of the last [`WINDOW`].
    samples: Box<[u32; WINDOW]>,
    /// The same samples in ascending order: the quantiles are read from it.
    sorted: Box<[u32; WINDOW]>,
    /// Samples held (at most [`WINDOW`]).
    len: usize,
    /// Where the next sample goes.
    next: usize,
    /// The median and the 95th percentile of the samples, once [`MIN_SAMPLES`] were measured
    /// (read on every request, changed on every answer).
    quantiles: Option<(Duration, Duration)>,
    /// Tokens, in millionths.
    tokens: u64,
    /// The last [`HEALTH_MEMORY`] answers, newest in bit 0: 1 for a failure.
    failures: u32,
}

impl Default for Hedger {
    fn default() -> Self {
        Hedger::new()
    }
}

impl Hedger {
    /// Nothing measured, no token.
    pub(crate) fn new() -> Self {
        Hedger {
            samples: Box::new([0; WINDOW]),
            sorted: Box::new([0; WINDOW]),
            len: 0,
            next: 0,
            quantiles: None,
            tokens: 0,
            failures: 0,
        }
    }

    /// An ordinary request (not a duplicate) was sent under `policy`: the budget grows by its
    /// share.
    pub(crate) fn handle_sent(&mut self, policy: &HedgePolicy) {
        if policy.enabled {
            self.tokens = (self.tokens + u64::from(policy.budget)).min(BURST * TOKEN);
        }
    }

    /// An answer passed the checks `ttfb` after its request was sent.
    pub(crate) fn handle_answer(&mut self, ttfb: Duration) {
        self.failures = (self.failures << 1) & Self::memory_mask();
        self.sample(ttfb);
    }

    /// A request was cancelled after waiting `waited` for its answer's head, because another
    /// request of its race won: its time to the head would have been at least that. It counts
    /// among the samples when it waited at least the automatic delay in force ([`FLOOR`]
    /// while the delay is unknown): see the module's documentation. It is no answer, so the
    /// endpoint's health does not change.
    pub(crate) fn handle_lost(&mut self, waited: Duration) {
        if waited >= self.automatic().unwrap_or(FLOOR) {
            self.sample(waited);
        }
    }

    /// Add a time to the head to the window.
    fn sample(&mut self, ttfb: Duration) {
        let micros = u32::try_from(ttfb.as_micros()).unwrap_or(u32::MAX);
        // The sorted samples keep their order: the new one goes in after the samples not
        // above it, and, once the window is full, the one it replaces in the ring comes out,
        // in one shift of the samples between the two places.
        let sorted = &mut self.sorted[..];
        let len = self.len;
        let new_at = sorted[..len].partition_point(|&s| s <= micros);
        if len == WINDOW {
            let old = self.samples[self.next];
            let old_at = sorted.partition_point(|&s| s < old);
            debug_assert_eq!(
                sorted[old_at], old,
                "the ring's samples are the sorted ones"
            );
            if new_at > old_at {
                sorted.copy_within(old_at + 1..new_at, old_at);
                sorted[new_at - 1] = micros;
            } else {
                sorted.copy_within(new_at..old_at, new_at + 1);
                sorted[new_at] = micros;
            }
        } else {
            sorted.copy_within(new_at..len, new_at + 1);
            sorted[new_at] = micros;
            self.len += 1;
        }
        self.samples[self.next] = micros;
        self.next = (self.next + 1) % WINDOW;
        self.quantiles = self.compute();
    }

    /// A request failed in transport (a connection refused, reset or timed out) or with a
    /// server error other than throttling.
    pub(crate) fn handle_failure(&mut self) {
        self.failures = ((self.failures << 1) | 1) & Self::memory_mask();
    }

    /// How long a request may wait before a duplicate is due under `policy`.
    pub(crate) fn poll_wait(&self, policy: &HedgePolicy) -> Wait {
        if !policy.enabled {
            return Wait::Never;
        }
        if let Some(after) = policy.after {
            return Wait::For(after);
        }
        match self.automatic() {
            None => Wait::Unknown(FLOOR),
            Some(delay) => Wait::For(delay),
        }
    }

    /// The automatic delay, once [`MIN_SAMPLES`] were measured.
    fn automatic(&self) -> Option<Duration> {
        let (median, p95) = self.quantiles?;
        Some(p95.max(median.mul_f64(MEDIAN_FACTOR)).max(FLOOR))
    }

    /// Whether a duplicate may go out now under `policy`, the endpoint `throttling` or not;
    /// [`Verdict::Send`] takes its token.
    pub(crate) fn poll_hedge(&mut self, policy: &HedgePolicy, throttling: bool) -> Verdict {
        let refusal = if !policy.enabled {
            Refusal::Disabled
        } else if throttling {
            Refusal::Throttling
        } else if self.failures != 0 {
            Refusal::Failing
        } else if self.tokens < TOKEN {
            Refusal::Budget
        } else {
            self.tokens -= TOKEN;
            return Verdict::Send;
        };
        Verdict::Refused(refusal)
    }

    /// The median and 95th percentile of the samples held, once [`MIN_SAMPLES`] were
    /// measured: each the smallest sample at or above its percentile.
    fn compute(&self) -> Option<(Duration, Duration)> {
        if self.len < MIN_SAMPLES {
            return None;
        }
        let at = |q: usize| {
            let rank = (self.len * q).div_ceil(100).saturating_sub(1);
            Duration::from_micros(u64::from(self.sorted[rank.min(self.len - 1)]))
        };
        Some((at(50), at(95)))
    }

    fn memory_mask() -> u32 {
        (1u32 << HEALTH_MEMORY) - 1
    }
}

#[cfg(test)]
mod tests {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    use karu_config::Seconds;
    use proptest::prelude::*;

    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn policy(after: HedgeAfter, percent: u32) -> HedgePolicy {
        let mut settings = HedgeSettings::default();
        settings.after = after;
        settings.budget = Share::from_percent(percent);
        HedgePolicy::from(&settings)
    }

    fn auto() -> HedgePolicy {
        HedgePolicy::from(&HedgeSettings::default())
    }

    fn off() -> HedgePolicy {
        let mut settings = HedgeSettings::default();
        settings.enabled = false;
        HedgePolicy::from(&settings)
    }

    #[test]
    fn the_automatic_delay_is_unknown_until_sixteen_answers_then_their_p95() {
        let mut h = Hedger::new();
        for _ in 0..MIN_SAMPLES - 1 {
            assert_eq!(h.poll_wait(&auto()), Wait::Unknown(FLOOR));
            h.handle_answer(20 * MS);
        }
        assert_eq!(h.poll_wait(&auto()), Wait::Unknown(FLOOR));
        h.handle_answer(20 * MS);
        // 20 ms answers: 1.5 × the median is 30 ms, below the floor.
        assert_eq!(h.poll_wait(&auto()), Wait::For(FLOOR));
        // A spread of 1..=128 ms, twice over: the p95 is 122 ms (the 244th of 256), the median
        // 64 ms (96 ms × 1.5).
        let mut h = Hedger::new();
        for _ in 0..2 {
            for ms in 1..=128u32 {
                h.handle_answer(ms * MS);
            }
        }
        assert_eq!(h.poll_wait(&auto()), Wait::For(122 * MS));
        // Slow answers (a slowed server): 1.5 × the median when it is above the p95.
        let mut h = Hedger::new();
        for _ in 0..WINDOW {
            h.handle_answer(400 * MS);
        }
        assert_eq!(h.poll_wait(&auto()), Wait::For(600 * MS));
    }

    #[test]
    fn the_window_forgets_answers_older_than_its_last_256() {
        let mut h = Hedger::new();
        for _ in 0..WINDOW {
            h.handle_answer(300 * MS);
        }
        assert_eq!(h.poll_wait(&auto()), Wait::For(450 * MS));
        // The endpoint got fast: once the window is full of new answers, the old are gone
        // (the quantiles follow every answer).
        for _ in 0..WINDOW {
            h.handle_answer(80 * MS);
        }
        assert_eq!(h.poll_wait(&auto()), Wait::For(120 * MS));
        for _ in 0..WINDOW / 2 {
            h.handle_answer(10 * MS);
        }
        // Half 80 ms, half 10 ms: the p95 is 80 ms.
        assert_eq!(h.poll_wait(&auto()), Wait::For(80 * MS));
    }

    #[test]
    fn a_fixed_delay_is_used_as_configured_and_off_means_never() {
        let h = Hedger::new();
        let fixed = policy(HedgeAfter::After(Seconds(10 * MS)), 5);
        assert_eq!(h.poll_wait(&fixed), Wait::For(10 * MS));
        assert_eq!(h.poll_wait(&off()), Wait::Never);
        // A budget of 0 is hedging off.
        assert_eq!(h.poll_wait(&policy(HedgeAfter::Auto, 0)), Wait::Never);
    }

    #[test]
    fn the_budget_starts_empty_and_fills_with_ordinary_requests() {
        let p = auto();
        let mut h = Hedger::new();
        assert_eq!(h.poll_hedge(&p, false), Verdict::Refused(Refusal::Budget));
        for _ in 0..19 {
            h.handle_sent(&p);
        }
        assert_eq!(h.poll_hedge(&p, false), Verdict::Refused(Refusal::Budget));
        h.handle_sent(&p);
        // 20 requests at 5 %: one duplicate.
        assert_eq!(h.poll_hedge(&p, false), Verdict::Send);
        assert_eq!(h.poll_hedge(&p, false), Verdict::Refused(Refusal::Budget));
        // A long quiet stretch saves at most BURST duplicates.
        for _ in 0..100_000 {
            h.handle_sent(&p);
        }
        let burst = (0..100)
            .take_while(|_| h.poll_hedge(&p, false) == Verdict::Send)
            .count();
        assert_eq!(burst as u64, BURST);
    }

    #[test]
    fn a_refused_duplicate_asks_again_soon_for_a_token_later_for_health_and_never_when_off() {
        // A token or room comes back within a few requests; an endpoint's health takes longer.
        assert_eq!(Refusal::Budget.again(), Some(AGAIN_BUDGET));
        assert_eq!(Refusal::Window.again(), Some(AGAIN_BUDGET));
        assert_eq!(Refusal::Throttling.again(), Some(FLOOR));
        assert_eq!(Refusal::Failing.again(), Some(FLOOR));
        assert_eq!(Refusal::Disabled.again(), None);
        assert!(AGAIN_BUDGET < FLOOR);
    }

    #[test]
    fn no_duplicate_while_throttling_or_failing() {
        let p = auto();
        let mut h = Hedger::new();
        for _ in 0..1000 {
            h.handle_sent(&p);
        }
        assert_eq!(
            h.poll_hedge(&p, true),
            Verdict::Refused(Refusal::Throttling)
        );
        h.handle_failure();
        assert_eq!(h.poll_hedge(&p, false), Verdict::Refused(Refusal::Failing));
        // The failure is remembered for 16 answers, then hedging resumes.
        for _ in 0..HEALTH_MEMORY - 1 {
            h.handle_answer(20 * MS);
            assert_eq!(h.poll_hedge(&p, false), Verdict::Refused(Refusal::Failing));
        }
        h.handle_answer(20 * MS);
        assert_eq!(h.poll_hedge(&p, false), Verdict::Send);
        // Refusals take no token: every one of them is still there.
        let tokens = h.tokens;
        let _ = h.poll_hedge(&p, true);
        assert_eq!(h.tokens, tokens);
        assert_eq!(
            h.poll_hedge(&off(), false),
            Verdict::Refused(Refusal::Disabled)
        );
        h.handle_sent(&off());
        assert_eq!(h.tokens, tokens, "requests without hedging add no token");
    }

    proptest! {
        /// The samples kept in order are the window's, sorted; the quantiles are read there.
        #[test]
        fn the_quantiles_are_those_of_the_sorted_window(
            answers in prop::collection::vec(0u32..5_000, MIN_SAMPLES..700),
        ) {
            let mut h = Hedger::new();
            for &ms in &answers {
                h.handle_answer(MS * ms / 7);
            }
            let mut sorted: Vec<u32> = h.samples[..h.len].to_vec();
            sorted.sort_unstable();
            prop_assert_eq!(&h.sorted[..h.len], &sorted[..]);
            let at = |q: usize| {
                let index = (sorted.len() * q).div_ceil(100).saturating_sub(1);
                Duration::from_micros(u64::from(sorted[index.min(sorted.len() - 1)]))
            };
            prop_assert_eq!(h.quantiles, Some((at(50), at(95))));
        }

        /// Whatever the order of requests, answers, failures and attempts, the duplicates
        /// never exceed the budget's share of the ordinary requests sent before them.
        #[test]
        fn duplicates_never_exceed_the_budget(
            percent in 0u32..=100,
            events in prop::collection::vec(0u8..4, 1..2000),
        ) {
            let p = policy(HedgeAfter::Auto, percent);
            let mut h = Hedger::new();
            let (mut sent, mut hedged) = (0u64, 0u64);
            for e in events {
                match e {
                    0 => { h.handle_sent(&p); sent += 1; }
                    1 => h.handle_answer(20 * MS),
                    2 => if h.poll_hedge(&p, false) == Verdict::Send { hedged += 1; },
                    _ => if sent % 7 == 0 { h.handle_failure() },
                }
                prop_assert!(hedged * TOKEN <= sent * u64::from(p.budget));
            }
        }
    }

    /// How a simulated transport reports to the hedger.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Reports {
        /// Every request that ended: a race's winner answered, its losers lost (the
        /// transport's way).
        Everyone,
        /// The winners' answers alone (what the transport reported before losers counted).
        WinnersOnly,
    }

    /// A simulated batch: `reads` requests, `concurrency` in flight, each answered after
    /// `latency(request number)`, under `p`; a request still waiting when its duplicate is due
    /// gets one if the policy allows, as the transport does (the simulation has no limit on
    /// duplicates in flight), and the first answer of a read wins. Returns when the last read
    /// was answered and the duplicates sent.
    fn simulate_with(
        reads: usize,
        concurrency: usize,
        latency: impl Fn(u64) -> Duration,
        p: HedgePolicy,
        reports: Reports,
    ) -> (Duration, u64) {
        #[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
        enum Event {
            /// A request of read `read`, sent at `sent`, is answered.
            Answer { read: usize, sent: Duration },
            /// Read `read` asks whether its `k`-th duplicate is due; its last request went out
            /// at `last`.
            Check { read: usize, k: u32, last: Duration },
        }
        let mut h = Hedger::new();
        let mut events: BinaryHeap<Reverse<(Duration, Event)>> = BinaryHeap::new();
        let mut done = vec![false; reads];
        // When each read's requests went out.
        let racing = std::cell::RefCell::new(vec![Vec::<Duration>::new(); reads]);
        let mut requests = 0u64;
        let mut send = |events: &mut BinaryHeap<_>, read: usize, now: Duration| {
            let at = now + latency(requests);
            requests += 1;
            racing.borrow_mut()[read].push(now);
            events.push(Reverse((at, Event::Answer { read, sent: now })));
        };
        // When the next check of a read whose last request went out at `last` is, at `now`.
        let check_at = |h: &Hedger, last: Duration, now: Duration| match h.poll_wait(&p) {
            Wait::For(d) => Some((last + d).max(now)),
            Wait::Unknown(d) => Some(now + d),
            Wait::Never => None,
        };
        let (mut next_read, mut hedges, mut wall) = (0usize, 0u64, Duration::ZERO);
        let mut start = |h: &mut Hedger,
                         events: &mut BinaryHeap<_>,
                         send: &mut dyn FnMut(&mut BinaryHeap<_>, usize, Duration),
                         now: Duration| {
            if next_read == reads {
                return;
            }
            h.handle_sent(&p);
            send(events, next_read, now);
            if let Some(at) = check_at(h, now, now) {
                let check = Event::Check {
                    read: next_read,
                    k: 1,
                    last: now,
                };
                events.push(Reverse((at, check)));
            }
            next_read += 1;
        };
        for _ in 0..concurrency {
            start(&mut h, &mut events, &mut send, Duration::ZERO);
        }
        while let Some(Reverse((now, event))) = events.pop() {
            match event {
                Event::Answer { read, sent } => {
                    if done[read] {
                        continue; // a loser, cancelled when the winner was answered
                    }
                    done[read] = true;
                    wall = now;
                    h.handle_answer(now - sent);
                    if reports == Reports::Everyone {
                        // The others are cancelled: they lost.
                        for &other in racing.borrow().get(read).into_iter().flatten() {
                            if other != sent {
                                h.handle_lost(now - other);
                            }
                        }
                    }
                    start(&mut h, &mut events, &mut send, now);
                }
                Event::Check { read, k, last } => {
                    if done[read] {
                        continue;
                    }
                    let Some(at) = check_at(&h, last, now) else {
                        continue;
                    };
                    if at > now || matches!(h.poll_wait(&p), Wait::Unknown(_)) {
                        events.push(Reverse((at, Event::Check { read, k, last })));
                        continue;
                    }
                    if h.poll_hedge(&p, false) != Verdict::Send {
                        continue;
                    }
                    hedges += 1;
                    send(&mut events, read, now);
                    if k < MAX_HEDGES
                        && let Some(at) = check_at(&h, now, now)
                    {
                        let check = Event::Check {
                            read,
                            k: k + 1,
                            last: now,
                        };
                        events.push(Reverse((at, check)));
                    }
                }
            }
        }
        assert!(done.iter().all(|&d| d));
        (wall, hedges)
    }

    /// [`simulate_with`] the default policy (`hedging`) or hedging off, every request
    /// reported.
    fn simulate(
        reads: usize,
        concurrency: usize,
        latency: impl Fn(u64) -> Duration,
        hedging: bool,
    ) -> (Duration, u64) {
        let p = if hedging { auto() } else { off() };
        simulate_with(reads, concurrency, latency, p, Reports::Everyone)
    }

    /// A uniform draw in `(0, 1]` for request `n` of the sequence `seed` (SplitMix64, as the
    /// mock's seeded faults draw by arrival).
    fn uniform(seed: u64, n: u64) -> f64 {
        let mut z = (seed << 32 ^ n).wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64 + f64::EPSILON
    }

    /// Times to the head from a Pareto distribution of this median and 99th percentile (the
    /// mock's `Fault::ParetoLatency`), drawn by request number.
    fn pareto(seed: u64, median: Duration, p99: Duration) -> impl Fn(u64) -> Duration {
        let shape = 50f64.ln() / (p99.as_secs_f64() / median.as_secs_f64()).ln();
        let scale = median.as_secs_f64() / 2f64.powf(1.0 / shape);
        move |n| Duration::from_secs_f64(scale / uniform(seed, n).powf(1.0 / shape)).min(p99 * 10)
    }

    #[test]
    fn under_a_heavy_tail_and_an_ample_budget_the_originals_that_lost_keep_the_delay_up() {
        // Times to the head with a heavy tail (median 20 ms, 99th percentile 400 ms) and a
        // budget that never runs out: the automatic delay alone decides which requests get a
        // duplicate. Counting the originals that lost their race, about one in fifteen is
        // hedged; from the winners alone, every slow original a duplicate beat leaves the
        // window, the percentile falls and more are hedged (one in eight).
        let ample = policy(HedgeAfter::Auto, 100);
        let reads = 3_000;
        for seed in 0..10 {
            let tail = || pareto(seed, 20 * MS, 400 * MS);
            let (_, everyone) = simulate_with(reads, 64, tail(), ample, Reports::Everyone);
            let (_, winners) = simulate_with(reads, 64, tail(), ample, Reports::WinnersOnly);
            assert!(
                everyone * 100 <= reads as u64 * 8,
                "seed {seed}: {everyone} duplicates"
            );
            assert!(
                winners * 100 >= reads as u64 * 11,
                "seed {seed}: {winners} duplicates"
            );
        }
    }

    #[test]
    fn a_request_that_lost_counts_only_when_it_waited_at_least_the_delay() {
        let mut h = Hedger::new();
        // Unknown delay: a request that waited at least the floor counts.
        h.handle_lost(FLOOR - MS);
        assert_eq!(h.len, 0);
        h.handle_lost(FLOOR);
        assert_eq!(h.len, 1);
        for _ in 0..MIN_SAMPLES {
            h.handle_answer(100 * MS);
        }
        // The delay is 150 ms (1.5 × the median): an original overtaken after 200 ms counts,
        // a duplicate overtaken after 30 ms does not.
        assert_eq!(h.poll_wait(&auto()), Wait::For(150 * MS));
        let before = h.len;
        h.handle_lost(30 * MS);
        assert_eq!(h.len, before);
        h.handle_lost(200 * MS);
        assert_eq!(h.len, before + 1);
        // A loss is not an answer: the endpoint's health is as it was.
        h.handle_failure();
        h.handle_lost(200 * MS);
        assert_eq!(
            h.poll_hedge(&auto(), false),
            Verdict::Refused(Refusal::Failing)
        );
    }

    /// 20 ms for every request, plus one second for 2 % of them (drawn from a seeded
    /// sequence by request number, as the mock's `FaultRule::share` does by arrival).
    fn tail(seed: u64) -> impl Fn(u64) -> Duration {
        move |n| {
            // SplitMix64 of (seed, n): a uniform draw per request.
            let mut z = (seed << 32 ^ n).wrapping_add(0x9e37_79b9_7f4a_7c15);
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            let slow = (z ^ (z >> 31)) % 1_000_000 < 20_000;
            20 * MS + if slow { 1000 * MS } else { Duration::ZERO }
        }
    }

    #[test]
    fn a_simulated_batch_with_a_two_percent_tail_keeps_its_wall_within_the_budget() {
        // The `tail` benchmark's shape: 1,000 reads, 64 in flight. Without a tail the batch
        // takes 16 rounds of 20 ms.
        let (plain, none) = simulate(1_000, 64, |_| 20 * MS, true);
        assert_eq!((plain, none), (320 * MS, 0), "no duplicate without a tail");
        for seed in 0..20 {
            let (slow, _) = simulate(1_000, 64, tail(seed), false);
            assert!(slow >= 1000 * MS, "seed {seed}: {slow:?}");
            let (hedged, hedges) = simulate(1_000, 64, tail(seed), true);
            assert!(hedged * 2 <= plain * 3, "seed {seed}: {hedged:?}");
            // About 2 % of the requests are hedged, within the 5 % budget.
            assert!((5..=50).contains(&hedges), "seed {seed}: {hedges}");
        }
    }

    #[test]
    fn a_simulated_slowed_server_is_hedged_within_the_budget_and_then_not_at_all() {
        // Every request takes 400 ms: the automatic delay learns it (600 ms) within the first
        // answers, and duplicates stop.
        let (_, hedges) = simulate(2_000, 64, |_| 400 * MS, true);
        assert_eq!(hedges, 0);
        // Under a fixed delay below every answer's time, the budget alone bounds them.
        let mut h = Hedger::new();
        let fixed = policy(HedgeAfter::After(Seconds(10 * MS)), 5);
        let mut sent = 0u64;
        let mut hedged = 0u64;
        for _ in 0..2_000 {
            h.handle_sent(&fixed);
            sent += 1;
            assert_eq!(h.poll_wait(&fixed), Wait::For(10 * MS));
            if h.poll_hedge(&fixed, false) == Verdict::Send {
                hedged += 1;
            }
            h.handle_answer(400 * MS);
        }
        assert_eq!((sent, hedged), (2_000, 100));
    }
}
