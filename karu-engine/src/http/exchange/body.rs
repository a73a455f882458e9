//! Receiving bodies: the body of an answer whose head passed the checks, skipped, kept and
//! drained into its destination; and an unwanted body, read to its end when that is cheap
//! (so the connection is reused) or dropped.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use http::header::CONTENT_LENGTH;
use http_body_util::BodyExt;
use hyper::body::Body as _;
use tokio::time::sleep_until;

use super::{Answer, Exchange, Failure, LastModified, Success};
use crate::batch::{BatchShared, until_cancelled};
use crate::check::{self, Delivered, Receipt};
use crate::http::endpoint::Arrival;
use crate::http::failure;
use crate::http::landing::Landing;
use crate::http::speed::LowSpeed;
use crate::retry::FailureClass;
use crate::sdk::{Error, Rejection, Status};

impl Exchange<'_> {
    /// Receive the body of an answer the head check accepted into `dst`.
    pub(super) async fn receive(
        &self,
        answer: Answer,
        receipt: Receipt,
        dst: &mut dyn Landing,
        base: u64,
        host: &str,
        speed: &mut LowSpeed,
    ) -> Result<Success, Failure> {
        if receipt.keep > dst.span().saturating_sub(base) {
            return Err(Failure::new(
                Error::internal("a response promised more bytes than were requested"),
                FailureClass::Permanent,
            ));
        }
        let mut arrival = Arrival::default();
        // Memory follows the data: room for what the head states will arrive.
        if receipt.body_len.is_some() {
            arrival.head_arrived(Instant::now());
            if let Err(error) = dst.expect(base + receipt.keep) {
                return Err(Failure::new(error, FailureClass::Permanent));
            }
        }
        let delivered = self
            .body(answer, &receipt, dst, base, host, speed, &mut arrival)
            .await?;
        Ok(Success {
            delivered,
            etag: receipt.etag,
            total: receipt.total,
            last_modified: LastModified::default(),
            arrival,
        })
    }

    /// Receive a body the head accepted: skip, keep, then drain a small remainder or drop;
    /// when the kept bytes landed goes into `arrival`.
    #[allow(clippy::too_many_arguments)]
    async fn body(
        &self,
        answer: Answer,
        receipt: &Receipt,
        dst: &mut dyn Landing,
        base: u64,
        host: &str,
        speed: &mut LowSpeed,
        arrival: &mut Arrival,
    ) -> Result<Delivered, Failure> {
        let Answer {
            response,
            mut carrier,
        } = answer;
        let mut body = response.into_body();
        let mut skip_left = receipt.skip;
        let keep = receipt.keep;
        let mut kept = 0u64;
        let mut seen = 0u64;
        let mut complete = false;
        let mut interrupted: Option<Failure> = None;
        loop {
            if kept == keep && skip_left == 0 {
                // Everything needed has arrived. The bytes after the kept ones are unwanted:
                // drained to keep the connection if they are at most the drain limit.
                let drain = self.limits.drain_limit;
                match receipt.body_len {
                    Some(len) if seen >= len => {
                        complete = body.is_end_stream() || body.frame().await.is_none();
                        break;
                    }
                    Some(len) if len.saturating_sub(receipt.skip.saturating_add(keep)) <= drain => {
                    }
                    None if seen - receipt.skip - kept <= drain => {}
                    _ => break, // dropping the body closes the connection
                }
            }
            // A cancelled batch stops here, before another frame; while the next frame is
            // pending, the cancellation wakes the select. (Polled first, the cancellation
            // registered a waiter on the batch's `Notify`, which every loop shares, for every
            // frame, also one already in hyper's buffer, as a small body's usually is.)
            if self.cancel.is_some_and(BatchShared::is_cancelled) {
                interrupted = Some(Failure::cancelled());
                break;
            }
            let frame = tokio::select! {
                biased;
                frame = body.frame() => frame,
                () = until_cancelled(self.cancel) => {
                    interrupted = Some(Failure::cancelled());
                    break;
                }
                () = sleep_until(self.wake_at(speed).into()) => {
                    let now = Instant::now();
                    let what = if now >= self.deadline {
                        "the read's deadline passed while receiving the body"
                    } else if speed.is_too_slow(now) {
                        "the transfer fell below the low-speed limit"
                    } else {
                        continue;
                    };
                    interrupted = Some(Failure::timed_out(what, host));
                    break;
                }
            };
            match frame {
                None => {
                    complete = true;
                    break;
                }
                Some(Err(e)) => {
                    let kind = failure::classify(&e, false);
                    interrupted = Some(Failure::transport(kind, host, e));
                    break;
                }
                Some(Ok(frame)) => {
                    let Ok(data) = frame.into_data() else {
                        continue;
                    };
                    let n = data.len() as u64;
                    seen += n;
                    let now = Instant::now();
                    speed.handle_bytes(n, now);
                    self.stats.body_bytes.fetch_add(n, Ordering::Relaxed);
                    let mut chunk: &[u8] = &data;
                    let skipped = skip_left.min(chunk.len() as u64);
                    skip_left -= skipped;
                    chunk = &chunk[skipped as usize..];
                    let take = (keep - kept).min(chunk.len() as u64) as usize;
                    if take > 0 {
                        arrival.landed(take as u64, now);
                        dst.put(base + kept, &chunk[..take]);
                        kept += take as u64;
                    }
                    if receipt.body_len.is_some_and(|len| seen > len) {
                        break;
                    }
                }
            }
        }
        if !complete {
            // Unread bytes are left on the connection: it must not carry another request.
            carrier.close();
        }
        match receipt.finish(kept, seen, complete) {
            Ok(delivered) => Ok(delivered),
            Err(rejection) => {
                // A truncated body is a partial transfer (retry or resume); a body longer than
                // promised is what the server says.
                let class = if rejection.retryable() {
                    FailureClass::Transport
                } else {
                    FailureClass::Permanent
                };
                // The bytes the body proved, which a resume may keep: of a truncated body,
                // those the check counts as proven (none of a whole body that may be the range
                // alone), not merely those that landed.
                let proven = match &rejection {
                    Rejection::Truncated { kept, .. } => *kept,
                    _ => 0,
                };
                let mut failure = match interrupted {
                    Some(f) if f.error.status() != Status::Network => f,
                    Some(mut f) => {
                        let message = format!(
                            "{} ({} of {} wanted bytes arrived)",
                            f.error.message(),
                            kept,
                            keep
                        );
                        f.error = f.error.reworded(Status::Network, message);
                        f
                    }
                    None => Failure::new(rejection.into(), class),
                };
                failure.kept = proven;
                failure.etag = receipt.etag.clone();
                failure.total = receipt.total;
                Err(failure)
            }
        }
    }

    /// Read up to `keep` bytes of a body and return them. The rest is unwanted: read to the
    /// end (so the connection can be reused) when it is at most the drain limit, else the
    /// body is dropped, which closes the connection.
    pub(super) async fn discard(&self, answer: Answer, keep: u64) -> Vec<u8> {
        let Answer {
            response,
            mut carrier,
        } = answer;
        let length: Option<u64> = response
            .headers()
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(check::header_number);
        let mut body = response.into_body();
        let mut kept = Vec::new();
        let mut seen = 0u64;
        let drain = self.limits.drain_limit;
        // Without a length, read on until the end or until the unwanted bytes pass the limit.
        let to_end = length.is_none_or(|len| len.saturating_sub(keep) <= drain);
        let until = (Instant::now() + self.limits.low_speed_time.min(Duration::from_secs(5)))
            .min(self.deadline);
        let ended = loop {
            let unwanted = seen - kept.len() as u64;
            if unwanted > drain || (!to_end && kept.len() as u64 >= keep) {
                break false;
            }
            let frame = tokio::select! {
                biased;
                () = until_cancelled(self.cancel) => break false,
                frame = body.frame() => frame,
                () = sleep_until(until.into()) => break false,
            };
            match frame {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        seen += data.len() as u64;
                        self.stats
                            .body_bytes
                            .fetch_add(data.len() as u64, Ordering::Relaxed);
                        let room = keep.saturating_sub(kept.len() as u64) as usize;
                        kept.extend_from_slice(&data[..room.min(data.len())]);
                    }
                }
                // The end of the body: the connection is reusable.
                None => break true,
                Some(Err(_)) => break false,
            }
        };
        if !ended {
            carrier.close();
        }
        kept
    }
}
