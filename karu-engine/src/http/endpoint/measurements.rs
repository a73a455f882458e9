//! What the client measured for one endpoint: its round-trip latency and the capacity it delivers
//! to all connections together, for the priced planner ([`crate::plan::price`]).
//!
//! Pure: no clock reads. Every exchange is recorded with its instants (request sent, response head,
//! last byte) as arguments, so tests drive it with a simulated clock.
//!
//! - **Round trip**: a moving average (weight 1/8, as TCP's smoothed RTT) of the time from sending
//!   a request to its response head.
//! - **Capacity**: body bytes are spread evenly over each response's body time into buckets of
//!   [`BUCKET`]. A bucket's rate is its bytes over the time in it during which some body was
//!   arriving (counted in [`SLOTS`] slots of a millisecond), so a round of bodies that fills the
//!   link for 10 ms of a bucket counts at its own rate, not spread over the bucket's 100 ms.
//!   (Spread over the bucket, a round of bodies arriving together in a few milliseconds counts
//!   at a fraction of what the link delivers, and the planner then cuts joins it should make.)
//!   The fastest bucket seen is the capacity observed, a lower bound of what the endpoint can deliver.
//!   It is remembered as a peak that halves every [`HALF_LIFE`] unless seen again, so a batch that
//!   uses little of the link does not make the next one believe the link is slow, while a link that
//!   really slows down is believed within minutes.
//!
//! Until [`MIN_EVIDENCE`] body bytes have been seen in bodies that tested the bandwidth, nothing is
//! measured, and the planner then follows the guards. A body tested the bandwidth when receiving it
//! took at least [`BANDWIDTH_BOUND`] of the round trip: a body that arrives with its head was
//! limited by latency, and its bytes say only that the endpoint can deliver at least that little.
//! (Without this gate, a latency-bound batch is measured as a slow endpoint, and the priced trade
//! splits joins the guards rightly make.)
//!
//! And the capacity is believed only while the traffic keeps testing it: while at least
//! [`MIN_BOUND_SHARE`] of the recent body bytes (a moving share over about [`SHARE_WINDOW`] bytes)
//! came in bodies that tested the bandwidth. A bucket's rate is the capacity only if the bandwidth
//! was what limited it; when nearly every body arrives with its head, the buckets show how fast the
//! plan's bodies came, not what the endpoint could deliver. Believing them anyway feeds on itself:
//! a price below the endpoint's worth cuts joins, the cut plan asks for fewer bytes and is bound by
//! round trips, so its buckets never show more than the price believed: a batch slowed by other
//! work on the client's machine would leave a low capacity that every later batch, on the idle
//! machine again, confirms.
//!
//! The floor is low because a priced plan on a slow link is itself latency-bound once the rounds
//! that fill the link at its start are over: such a batch receives only a small share of its
//! bytes in bodies that tested the bandwidth, one the guards planned a much larger share, and
//! latency-bound loopback batches hardly any. So on a slow link a batch may start below the floor
//! and be planned by the guards; the rounds that fill the link at its start make the price
//! believed again, and the merged requests still to start are cut by it: one round of
//! exploration, at a small cost in wall. The peak is kept while it is not believed.

use std::time::{Duration, Instant};

use crate::plan::price::{Measured, share};

/// Width of one capacity bucket.
pub(crate) const BUCKET: Duration = Duration::from_millis(100);
/// Slots of a bucket's busy map (of 1 ms each): a bucket's rate divides its bytes by the
/// slots in which some body was arriving.
const SLOTS: u64 = 100;
const _: () = assert!(SLOTS <= 128, "a bucket's busy map is a u128");
/// One slot's width, in nanoseconds.
const SLOT_NANOS: u64 = BUCKET_NANOS / SLOTS;
/// [`BUCKET`] in nanoseconds.
const BUCKET_NANOS: u64 = BUCKET.as_nanos() as u64;
/// Buckets kept: responses whose body ended earlier than this many buckets before the newest
/// one no longer count.
const BUCKETS: u64 = 32;
/// The observed peak capacity halves over this time unless observed again.
pub(crate) const HALF_LIFE: Duration = Duration::from_secs(300);
/// Body bytes an endpoint must have delivered, in bodies that tested the bandwidth, before
/// its capacity is believed.
pub(crate) const MIN_EVIDENCE: u64 = 8 << 20;
/// The share of the smoothed round trip a body must take to count as testing the bandwidth.
pub(crate) const BANDWIDTH_BOUND: f64 = 0.125;
/// The body bytes over which the share of bytes that tested the bandwidth moves: a body of
/// this many bytes moves it about two thirds of the way to its own 0 or 1.
pub(crate) const SHARE_WINDOW: u64 = 64 << 20;
/// The share of recent body bytes that must have tested the bandwidth for the capacity to be
/// believed.
pub(crate) const MIN_BOUND_SHARE: f64 = 1.0 / 32.0;

/// The measurements of one endpoint.
#[derive(Debug, Clone)]
pub(crate) struct Measurements {
    /// Bucket numbers count from here.
    origin: Instant,
    /// Smoothed round trip, once one was measured.
    rtt: Option<Duration>,
    /// Body bytes and busy slots per bucket, a ring indexed by bucket number modulo
    /// [`BUCKETS`].
    buckets: [Bucket; BUCKETS as usize],
    /// The newest bucket number written.
    newest: u64,
    /// Body bytes recorded in all.
    received: u64,
    /// Body bytes of bodies that tested the bandwidth (see [`BANDWIDTH_BOUND`]).
    evidence: u64,
    /// The share of recent body bytes that came in bodies that tested the bandwidth, a
    /// moving average over about [`SHARE_WINDOW`] bytes.
    bound_share: f64,
    /// Highest capacity observed (bytes per second), at `peak_at`.
    peak: u64,
    peak_at: Instant,
}

impl Measurements {
    /// Measurements with nothing measured; `origin` is any instant not after the first exchange.
    pub(crate) fn new(origin: Instant) -> Self {
        Measurements {
            origin,
            rtt: None,
            buckets: [Bucket::default(); BUCKETS as usize],
            newest: 0,
            received: 0,
            evidence: 0,
            bound_share: 0.0,
            peak: 0,
            peak_at: origin,
        }
    }

    /// One successful exchange: the request was sent at `sent`, its head arrived at `head`,
    /// its last body byte at `done`, and it carried `bytes` body bytes.
    pub(crate) fn record(&mut self, sent: Instant, head: Instant, done: Instant, bytes: u64) {
        let head = head.max(sent);
        let done = done.max(head);
        let sample = head - sent;
        self.rtt = Some(match self.rtt {
            None => sample,
            // rtt + (sample - rtt) / 8, in signed nanoseconds.
            Some(rtt) => {
                let (old, new) = (rtt.as_nanos() as i128, sample.as_nanos() as i128);
                let smoothed = old + (new - old) / 8;
                Duration::from_nanos(u64::try_from(smoothed.max(0)).unwrap_or(u64::MAX))
            }
        });
        if bytes == 0 {
            return;
        }
        self.received = self.received.saturating_add(bytes);
        let rtt = self.rtt.unwrap_or(sample);
        let tested = (done - head).as_secs_f64() >= rtt.as_secs_f64() * BANDWIDTH_BOUND;
        if tested {
            self.evidence = self.evidence.saturating_add(bytes);
        }
        // An exponential moving average by bytes: `bytes` of one kind move the share by
        // 1 - e^(-bytes / SHARE_WINDOW) of the way to 0 or 1, however the bytes come in bodies.
        let weight = 1.0 - (-(bytes as f64) / SHARE_WINDOW as f64).exp();
        let target = if tested { 1.0 } else { 0.0 };
        self.bound_share += (target - self.bound_share) * weight;
        // From here on, instants are nanoseconds since the origin: one subtraction each
        // instead of one per use (the measurements run on every request).
        let (head_at, done_at) = (self.nanos(head), self.nanos(done));
        let (first, last) = (head_at / BUCKET_NANOS, done_at / BUCKET_NANOS);
        self.advance(last);
        let oldest = self.newest.saturating_sub(BUCKETS - 1);
        // Spread evenly over [head, done]: each bucket gets the bytes of its overlap, as the
        // difference of the bytes due by its end and by its start (all of them by `done`).
        let body = done_at - head_at;
        let due = |t: u64| -> u64 {
            if t >= done_at {
                bytes
            } else {
                (u128::from(bytes) * u128::from(t.saturating_sub(head_at)) / u128::from(body))
                    as u64
            }
        };
        for b in first.max(oldest)..=last {
            self.mark_busy(b, head_at, done_at);
            let share = if first == last {
                bytes
            } else {
                due(start_of(b + 1).min(done_at)) - due(start_of(b).max(head_at))
            };
            self.add(b, share, done);
        }
    }

    /// The highest capacity observed, halved for every [`HALF_LIFE`] since; `None` before
    /// [`MIN_EVIDENCE`] bytes of bodies that tested the bandwidth, and while less than
    /// [`MIN_BOUND_SHARE`] of the recent body bytes did.
    pub(crate) fn capacity(&self, now: Instant) -> Option<u64> {
        if self.evidence < MIN_EVIDENCE || self.bound_share < MIN_BOUND_SHARE || self.peak == 0 {
            return None;
        }
        Some(self.decayed(now))
    }

    /// What the planner prices gaps with, for `connections` busy connections; `None` until
    /// both a round trip and the capacity are measured.
    pub(crate) fn measured(&self, now: Instant, connections: usize) -> Option<Measured> {
        Some(Measured {
            rtt: self.rtt?,
            throughput: share(self.capacity(now)?, connections),
        })
    }

    /// The smoothed round trip, if one was measured.
    #[cfg(test)]
    pub(crate) fn rtt(&self) -> Option<Duration> {
        self.rtt
    }

    fn decayed(&self, now: Instant) -> u64 {
        let age = now.saturating_duration_since(self.peak_at);
        let halvings = age.as_secs_f64() / HALF_LIFE.as_secs_f64();
        (self.peak as f64 * (-halvings).exp2()) as u64
    }

    /// Nanoseconds from the origin to `at` (none before it; 2^64 of them are 584 years).
    fn nanos(&self, at: Instant) -> u64 {
        let since = at.saturating_duration_since(self.origin);
        u64::try_from(since.as_nanos()).unwrap_or(u64::MAX)
    }

    /// Make `bucket` the newest, emptying the buckets it passes.
    fn advance(&mut self, bucket: u64) {
        if bucket <= self.newest {
            return;
        }
        let from = (self.newest + 1).max(bucket.saturating_sub(BUCKETS - 1));
        for b in from..=bucket {
            self.buckets[(b % BUCKETS) as usize] = Bucket::default();
        }
        self.newest = bucket;
    }

    /// Mark the slots of `bucket` (one in the ring) during which a body arriving from `head`
    /// to `done` was arriving: from the slot of `head` to the one holding the body's last
    /// nanosecond (the slot of `head` alone for a body that took no time), none if the body
    /// does not reach into the bucket. All three in nanoseconds since the origin.
    fn mark_busy(&mut self, bucket: u64, head: u64, done: u64) {
        let (start, end) = (start_of(bucket), start_of(bucket + 1));
        let last = if done > head { done - 1 } else { done };
        if last < start || head >= end {
            return;
        }
        let index = |t: u64| -> u32 {
            let i = t.saturating_sub(start) / SLOT_NANOS;
            u32::try_from(i.min(SLOTS - 1)).unwrap_or(0)
        };
        let (from, to) = (index(head.max(start)), index(last));
        let mask = ((1u128 << (to - from + 1)) - 1) << from;
        self.buckets[(bucket % BUCKETS) as usize].busy |= mask;
    }

    /// Add `bytes` to `bucket` (ignored if it is out of the ring) and raise the peak, as seen
    /// at `now`, if that bucket's rate is now the highest.
    fn add(&mut self, bucket: u64, bytes: u64, now: Instant) {
        if bucket + BUCKETS <= self.newest || bucket > self.newest {
            return;
        }
        let entry = &mut self.buckets[(bucket % BUCKETS) as usize];
        entry.bytes = entry.bytes.saturating_add(bytes);
        let busy_nanos = u128::from(entry.busy.count_ones().max(1)) * u128::from(SLOT_NANOS);
        let per_second = u128::from(entry.bytes) * 1_000_000_000 / busy_nanos;
        let rate = u64::try_from(per_second).unwrap_or(u64::MAX);
        if rate >= self.decayed(now) {
            self.peak = rate;
            self.peak_at = now;
        }
    }
}

/// Nanoseconds from the origin to the start of `bucket` (at most 2^64 - 1).
fn start_of(bucket: u64) -> u64 {
    bucket.saturating_mul(BUCKET_NANOS)
}

/// One bucket of [`BUCKET`]: the body bytes spread into it, and its slots (bit `i` for the
/// `i`-th of [`SLOTS`]) in which some body was arriving.
#[derive(Debug, Clone, Copy, Default)]
struct Bucket {
    bytes: u64,
    busy: u128,
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::plan::price::break_even_gap;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn nothing_is_measured_before_the_evidence_threshold() {
        let t0 = Instant::now();
        let mut m = Measurements::new(t0);
        assert_eq!(m.measured(t0, 64), None);
        // A size probe: a round trip, one byte.
        m.record(t0, t0 + 20 * MS, t0 + 20 * MS, 1);
        assert_eq!(m.rtt(), Some(20 * MS));
        assert_eq!(m.capacity(t0 + 20 * MS), None);
        assert_eq!(m.measured(t0 + 20 * MS, 64), None);
    }

    #[test]
    fn the_round_trip_is_smoothed_by_an_eighth() {
        let t0 = Instant::now();
        let mut m = Measurements::new(t0);
        m.record(t0, t0 + 20 * MS, t0 + 20 * MS, 0);
        m.record(t0, t0 + 100 * MS, t0 + 100 * MS, 0);
        assert_eq!(m.rtt(), Some(30 * MS));
        m.record(t0, t0 + 30 * MS, t0 + 30 * MS, 0);
        assert_eq!(m.rtt(), Some(30 * MS));
        // A head before the send (clock skew between threads) counts as no wait.
        m.record(t0 + MS, t0, t0, 0);
        assert_eq!(m.rtt(), Some(Duration::from_micros(26_250)));
    }

    /// 64 connections on a 1 Gbit/s link: each 20 ms round trip then its share of the link.
    #[test]
    fn a_saturated_link_is_measured_as_its_capacity_and_priced_as_in_the_model() {
        let t0 = Instant::now();
        let mut m = Measurements::new(t0);
        let capacity = 125_000_000u64;
        // 1 s of 64 KiB bodies on the link, 64 at once, each receiving its 1/64 share: one
        // starts every 64 KiB / capacity, and each takes 64 times that.
        let body = 65_536u64;
        let per_body = Duration::from_nanos(body * 1_000_000_000 / capacity);
        let mut now = t0;
        for i in 0..2000u32 {
            let sent = t0 + i * per_body;
            let head = sent + 20 * MS;
            let done = head + 64 * per_body;
            now = done;
            m.record(sent, head, done, body);
        }
        let seen = m.capacity(now).expect("enough evidence");
        assert!(
            (capacity * 95 / 100..=capacity * 105 / 100).contains(&seen),
            "{seen}"
        );
        let measured = m.measured(now, 64).unwrap();
        assert_eq!(measured.rtt, 20 * MS);
        let gap = break_even_gap(&measured);
        assert!((37_000..=41_000).contains(&gap), "{gap}");
    }

    #[test]
    fn the_peak_halves_every_half_life_unless_seen_again() {
        let t0 = Instant::now();
        let mut m = Measurements::new(t0);
        // 16 MiB arriving over 10 ms (of a 20 ms round trip): 1,677,721,600 B/s, the rate
        // while it arrived, not its bytes spread over the bucket's 100 ms.
        let (head, done) = (t0 + 20 * MS, t0 + 30 * MS);
        m.record(t0, head, done, 16 << 20);
        let peak = 1_677_721_600;
        assert_eq!(m.capacity(done), Some(peak));
        assert_eq!(m.capacity(done + HALF_LIFE), Some(peak / 2));
        assert_eq!(m.capacity(done + 2 * HALF_LIFE), Some(peak / 4));
        // Less traffic later does not lower it faster; the same traffic restores it.
        let later = done + HALF_LIFE;
        m.record(later, later, later + 10 * MS, 1 << 20);
        assert_eq!(m.capacity(later), Some(peak / 2));
        m.record(later, later, later + 10 * MS, 15 << 20);
        assert_eq!(m.capacity(later + 10 * MS), Some(peak));
    }

    #[test]
    fn a_round_that_fills_the_link_briefly_is_measured_at_its_own_rate() {
        // The first round of a batch on loopback: 64 bodies of 190 KiB, all sent at once,
        // their heads after 20 ms, and the bodies arriving together over the next 12.5 ms,
        // each taking 2.5-12.5 ms (so each tested the bandwidth). 12.45 MB in 12.5 ms is
        // about 1 GB/s; spread over the bucket's 100 ms it would be 125 MB/s, and the price
        // (a round trip of one connection's share) would cut gaps above 39 KB.
        let t0 = Instant::now();
        let mut m = Measurements::new(t0);
        let head = t0 + 20 * MS;
        for i in 0..64u32 {
            let done = head + Duration::from_micros(2_500 + 10_000 * u64::from(i) / 63);
            m.record(t0, head, done, 190 << 10);
        }
        let now = head + 13 * MS;
        let capacity = m.capacity(now).expect("measured");
        assert!(
            (900_000_000..=1_100_000_000).contains(&capacity),
            "{capacity}"
        );
        let price = break_even_gap(&m.measured(now, 64).unwrap());
        assert!((280_000..=350_000).contains(&price), "{price}");
    }

    #[test]
    fn a_body_marks_busy_only_the_slots_it_arrived_in() {
        let t0 = Instant::now();
        let mut m = Measurements::new(t0);
        // 10 MB over 50-100 ms: the second half of bucket 0, nothing of bucket 1 (it ends
        // exactly where bucket 1 starts), so 200 MB/s.
        m.record(t0, t0 + 50 * MS, t0 + 100 * MS, 10_000_000);
        assert_eq!(m.buckets[0].busy, ((1u128 << 50) - 1) << 50);
        assert_eq!(m.buckets[1].busy, 0);
        assert_eq!(m.peak, 200_000_000);
        // A body that took no time marks its own slot: 1 MB in the millisecond at 150 ms.
        m.record(t0 + 140 * MS, t0 + 150 * MS, t0 + 150 * MS, 1_000_000);
        assert_eq!(m.buckets[1].busy, 1u128 << 50);
        assert_eq!(m.peak, 1_000_000_000);
    }

    #[test]
    fn bodies_that_arrive_with_their_heads_never_measure_the_capacity() {
        // A latency-bound endpoint: 2,000 bodies of 64 KiB (131 MB), each within 10 µs of its
        // head after a 20 ms round trip. They say only that the endpoint delivers at least
        // that much, so the planner keeps to the guards.
        let t0 = Instant::now();
        let mut m = Measurements::new(t0);
        let mut now = t0;
        for i in 0..2000u32 {
            let sent = t0 + i * Duration::from_micros(150);
            let head = sent + 20 * MS;
            now = head + Duration::from_micros(10);
            m.record(sent, head, now, 65_536);
        }
        assert_eq!(m.rtt(), Some(20 * MS));
        assert_eq!(m.measured(now, 64), None);
        // One body that took half a round trip is evidence again.
        m.record(now, now + 20 * MS, now + 30 * MS, 16 << 20);
        assert!(m.measured(now + 30 * MS, 64).is_some());
    }

    /// Loopback as `scattered-10k` meets it: 64 bodies of 190 KiB a round trip (20 ms),
    /// each in 200 µs, or, with `slow_every` > 0, every `slow_every`-th in 3 ms (a machine
    /// busy with other work); `rounds` rounds from `t0`. Returns when the last body ended.
    fn loopback_rounds(m: &mut Measurements, t0: Instant, rounds: u32, slow_every: u32) -> Instant {
        let mut now = t0;
        for round in 0..rounds {
            let sent = t0 + round * 20 * MS;
            for i in 0..64u32 {
                let head = sent + 20 * MS;
                let slow = slow_every > 0 && (round * 64 + i) % slow_every == 0;
                let body = if slow {
                    3 * MS
                } else {
                    Duration::from_micros(200)
                };
                now = now.max(head + body);
                m.record(sent, head, head + body, 190 << 10);
            }
        }
        now
    }

    #[test]
    fn a_few_slow_bodies_in_latency_bound_traffic_measure_nothing() {
        // One body in 64 took 3 ms (more than an eighth of the round trip): 15 MB of evidence
        // in 80 rounds, nearly twice the threshold, but 98 % of the bytes arrived with their
        // heads. The buckets show how fast the plan's bodies came, not what the endpoint
        // can deliver, and pricing gaps with it would cut joins.
        let t0 = Instant::now();
        let mut m = Measurements::new(t0);
        let now = loopback_rounds(&mut m, t0, 80, 64);
        assert!(m.evidence >= MIN_EVIDENCE * 18 / 10, "{}", m.evidence);
        assert!(m.peak > 0);
        assert!(m.bound_share < MIN_BOUND_SHARE, "{}", m.bound_share);
        assert_eq!(m.capacity(now), None);
        assert_eq!(m.measured(now, 64), None);
    }

    #[test]
    fn a_capacity_is_believed_only_while_the_traffic_tests_it() {
        let t0 = Instant::now();
        let mut m = Measurements::new(t0);
        // A busy machine: every body takes 3 ms, so every one tests the bandwidth, and the
        // capacity is measured from them.
        let busy = loopback_rounds(&mut m, t0, 10, 1);
        let slow = m.capacity(busy).expect("measured while busy");
        // The machine is idle again and the traffic latency-bound: 50 MB of bodies that
        // arrive with their heads do not undo the measurement, 250 MB do, and the planner
        // goes back to the guards.
        let idle = loopback_rounds(&mut m, busy, 4, 0);
        assert!(m.capacity(idle).is_some(), "50 MB do not undo it");
        let idle = loopback_rounds(&mut m, idle, 16, 0);
        assert_eq!(m.capacity(idle), None);
        assert_eq!(m.measured(idle, 64), None);
        // However long it stays latency-bound.
        let idle = loopback_rounds(&mut m, idle, 200, 0);
        assert_eq!(m.capacity(idle), None);
        // The peak was kept meanwhile (buckets of latency-bound traffic may still raise it:
        // they are lower bounds), and bodies that test the bandwidth again make it believed.
        assert!(m.peak >= slow);
        let busy = loopback_rounds(&mut m, idle, 1, 1);
        let again = m.capacity(busy).expect("believed again");
        assert!(again >= slow * 99 / 100, "{again} {slow}");
    }

    #[test]
    fn a_link_keeps_its_price_exploring_with_the_guards_at_most_every_other_batch() {
        // The `scattered-10k` batches on the link model, as traced: a batch planned with the
        // price gets ~2 MB of its ~110 MB in bodies that test the bandwidth, a batch the
        // guards planned ~25 MB of ~128 MB; either way those come first, in the rounds that
        // fill the link at the batch's start, and the rest arrive with their heads.
        let t0 = Instant::now();
        let mut m = Measurements::new(t0);
        let mut now = t0;
        let body = |m: &mut Measurements, now: &mut Instant, bytes: u64, time: Duration| {
            let (sent, head) = (*now, *now + 20 * MS);
            *now = head + time;
            m.record(sent, head, *now, bytes);
        };
        let mut planned = Vec::new();
        for _ in 0..20 {
            let priced = m.measured(now, 64).is_some();
            planned.push(priced);
            let (tested, untested) = if priced { (50, 2750) } else { (100, 2570) };
            for _ in 0..tested {
                body(
                    &mut m,
                    &mut now,
                    if priced { 40_000 } else { 250_000 },
                    20 * MS,
                );
            }
            // The guards' exploration makes the price believed again within the batch,
            // where it cuts the merged requests still to start.
            assert!(m.measured(now, 64).is_some());
            for _ in 0..untested {
                body(&mut m, &mut now, 40_000, Duration::from_micros(300));
            }
        }
        // The first batch, unmeasured, is the guards'; after it, never two in a row.
        assert!(!planned[0]);
        assert!(planned.windows(2).all(|w| w[0] || w[1]), "{planned:?}");
        let priced = planned.iter().filter(|&&p| p).count();
        assert!(priced >= 10, "{planned:?}");
    }

    #[test]
    fn a_long_body_is_spread_over_its_buckets() {
        let t0 = Instant::now();
        let mut m = Measurements::new(t0);
        // 100 MB over 1 s from t0: 10 MB per bucket, 100 MB/s, not 100 MB in one bucket.
        m.record(t0, t0, t0 + 1000 * MS, 100_000_000);
        assert_eq!(m.capacity(t0 + 1000 * MS), Some(100_000_000));
        // Bytes add up to what was received.
        assert_eq!(m.received, 100_000_000);
    }

    proptest! {
        /// Spreading never loses or invents bytes while every bucket stays in the ring, and
        /// the capacity is never above the fastest rate that happened.
        #[test]
        fn spreading_keeps_every_byte(
            exchanges in prop::collection::vec((0u64..1_000, 0u64..2_000, 1u64..50_000_000), 1..40),
        ) {
            let t0 = Instant::now();
            let mut m = Measurements::new(t0);
            let mut total = 0u64;
            let mut fastest = 0u64;
            for &(start_ms, len_ms, bytes) in &exchanges {
                let head = t0 + Duration::from_millis(start_ms);
                let done = head + Duration::from_millis(len_ms);
                m.record(head, head, done, bytes);
                total += bytes;
                // All bytes in one slot of a millisecond is the most a response can show.
                fastest += bytes * 1000;
            }
            // Every exchange ends within 3 s: all of it stays in 32 buckets of 100 ms.
            let kept: u64 = m.buckets.iter().map(|b| b.bytes).sum();
            prop_assert_eq!(kept, total);
            prop_assert!(m.peak <= fastest);
            // A bucket that received bytes saw them arrive in at least one of its slots.
            for b in &m.buckets {
                prop_assert!(b.bytes == 0 || b.busy != 0, "{b:?}");
            }
        }
    }
}
