//! Per-read timings and counts: when a read was queued, when the first byte of the transfer
//! that carried it arrived, when it completed, how many attempts that transfer made and how
//! many bytes it received. Every [`Completion`](crate::Completion) carries one [`Timing`], a
//! small `Copy` value stamped without allocating: one clock reading per transfer's first byte
//! and one per group of completions queued together.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// "No first byte": the transfer received none (it failed first, or never ran).
const NONE: u64 = u64::MAX;

/// When a read was queued, received its first byte and completed, and what carried it.
///
/// Times are measured from the read's queueing: the submission of its batch.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// Nanoseconds from `queued` to the transfer's first byte, or [`NONE`].
    first_byte: u64,
    /// Nanoseconds from `queued` to the completion.
    done: u64,
    /// The transfer's id (0: none).
    transfer: u64,
    transfer_bytes: u64,
    attempts: u32,
}

impl Timing {
    /// A read that no transfer has carried yet (stamped when completed).
    pub(crate) const fn new() -> Timing {
        Timing {
            first_byte: NONE,
            done: 0,
            transfer: 0,
            transfer_bytes: 0,
            attempts: 0,
        }
    }

    /// From submission to the first byte the transfer carrying the read received (of any of
    /// the reads it carried), if it received one.
    pub fn first_byte(&self) -> Option<Duration> {
        (self.first_byte != NONE).then(|| Duration::from_nanos(self.first_byte))
    }

    /// From submission to the read's completion being queued for the caller.
    pub fn done(&self) -> Duration {
        Duration::from_nanos(self.done)
    }

    /// Requests the transfer carrying the read sent (1 without a retry); 0 where no request
    /// was sent (a local read, a read rejected or cancelled before it started).
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// The transfer that carried the read: an id unique within the process, shared by every
    /// read one request served (reads merged into one request have the same id). `None` for
    /// local reads and reads that no request carried.
    pub fn transfer(&self) -> Option<u64> {
        (self.transfer != 0).then_some(self.transfer)
    }

    /// Response body bytes of the span the transfer received, over all its attempts (a
    /// retried or resumed transfer counts every attempt's bytes). For a read alone in its
    /// transfer, its own bytes; for merged reads, the whole merged span's.
    pub fn transfer_bytes(&self) -> u64 {
        self.transfer_bytes
    }

    /// Stamp the completion time of a read queued at `queued`.
    pub(crate) fn stamp_done(&mut self, queued: Instant, now: Instant) {
        self.done = nanos(now.saturating_duration_since(queued));
    }

    /// Record the transfer that carried a read queued at `queued`.
    pub(crate) fn carried_by(&mut self, meter: &TransferMeter, queued: Instant) {
        self.transfer = meter.id;
        self.transfer_bytes = meter.bytes;
        self.attempts = meter.attempts;
        self.first_byte = match meter.first_byte {
            Some(at) => nanos(at.saturating_duration_since(queued)),
            None => NONE,
        };
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(NONE - 1)
}

impl Default for Timing {
    fn default() -> Self {
        Timing::new()
    }
}

impl fmt::Debug for Timing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Timing")
            .field("first_byte", &self.first_byte())
            .field("done", &self.done())
            .field("attempts", &self.attempts)
            .field("transfer", &self.transfer())
            .field("transfer_bytes", &self.transfer_bytes)
            .finish()
    }
}

/// Ids of transfers, unique within the process (0 is "none").
static NEXT_TRANSFER: AtomicU64 = AtomicU64::new(1);

/// What one transfer did: its id, its first byte, its attempts and the bytes it received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TransferMeter {
    pub(crate) id: u64,
    pub(crate) first_byte: Option<Instant>,
    pub(crate) attempts: u32,
    pub(crate) bytes: u64,
}

impl TransferMeter {
    /// A new transfer's meter, with a fresh id.
    pub(crate) fn start() -> TransferMeter {
        TransferMeter {
            id: NEXT_TRANSFER.fetch_add(1, Ordering::Relaxed),
            first_byte: None,
            attempts: 0,
            bytes: 0,
        }
    }

    /// An attempt started (attempts count from 1).
    pub(crate) fn attempt(&mut self, attempt: u32) {
        self.attempts = self.attempts.max(attempt);
    }

    /// `n` bytes arrived at `now` (the clock is read by the caller only for the first).
    pub(crate) fn received(&mut self, n: u64, now: impl FnOnce() -> Instant) {
        if self.first_byte.is_none() && n > 0 {
            self.first_byte = Some(now());
        }
        self.bytes += n;
    }
}

/// The names of what the `metrics` feature publishes.
pub mod names {
    /// Counter of completions, labelled `status` (`Ok`, `NotFound`, ...).
    pub const READS: &str = "karu_reads_total";
    /// Counter of the bytes completions delivered.
    pub const READ_BYTES: &str = "karu_read_bytes_total";
    /// Histogram of seconds from a read's submission to its completion.
    pub const READ_SECONDS: &str = "karu_read_seconds";
    /// Histogram of seconds from a read's submission to its transfer's first byte.
    pub const FIRST_BYTE_SECONDS: &str = "karu_read_first_byte_seconds";
    /// Counter of HTTP transfers that ended (each carries one or more reads).
    pub const TRANSFERS: &str = "karu_transfers_total";
    /// Histogram of the attempts of each HTTP transfer.
    pub const TRANSFER_ATTEMPTS: &str = "karu_transfer_attempts";
    /// Counter of the body bytes HTTP transfers received, over every attempt.
    pub const TRANSFER_BYTES: &str = "karu_transfer_bytes_total";
}

/// Publishes a completion (feature `metrics`): one counter by status, its bytes, its times.
#[cfg(feature = "metrics")]
pub(crate) fn publish(c: &crate::Completion) {
    metrics::counter!(names::READS, "status" => c.status().name()).increment(1);
    metrics::counter!(names::READ_BYTES).increment(c.bytes_received());
    let t = c.timing();
    metrics::histogram!(names::READ_SECONDS).record(t.done());
    if let Some(first) = t.first_byte() {
        metrics::histogram!(names::FIRST_BYTE_SECONDS).record(first);
    }
}

/// Publishes what a transfer did (feature `metrics`).
#[cfg(feature = "metrics")]
pub(crate) fn publish_transfer(meter: &TransferMeter) {
    metrics::counter!(names::TRANSFERS).increment(1);
    metrics::histogram!(names::TRANSFER_ATTEMPTS).record(f64::from(meter.attempts));
    metrics::counter!(names::TRANSFER_BYTES).increment(meter.bytes);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_completion_measures_from_its_batchs_submission() {
        let t0 = Instant::now();
        let mut timing = Timing::new();
        assert_eq!(timing.first_byte(), None);
        assert_eq!(timing.transfer(), None);
        let mut meter = TransferMeter::start();
        meter.attempt(1);
        meter.received(0, || unreachable!("no clock for an empty write"));
        meter.received(10, || t0 + Duration::from_millis(3));
        meter.received(5, || unreachable!("the first byte is stamped once"));
        meter.attempt(2);
        timing.carried_by(&meter, t0);
        timing.stamp_done(t0, t0 + Duration::from_millis(7));
        assert_eq!(timing.first_byte(), Some(Duration::from_millis(3)));
        assert_eq!(timing.done(), Duration::from_millis(7));
        assert_eq!(timing.attempts(), 2);
        assert_eq!(timing.transfer_bytes(), 15);
        assert_eq!(timing.transfer(), Some(meter.id));
    }

    #[test]
    fn transfers_have_distinct_nonzero_ids() {
        let (a, b) = (TransferMeter::start(), TransferMeter::start());
        assert_ne!(a.id, b.id);
        assert!(a.id > 0 && b.id > 0);
    }

    #[test]
    fn a_clock_before_submission_reads_as_zero() {
        let t0 = Instant::now() + Duration::from_secs(1);
        let mut timing = Timing::new();
        timing.stamp_done(t0, Instant::now());
        assert_eq!(timing.done(), Duration::ZERO);
    }
}
