//! The life of one logical remote read: prepare late, exchange, then resume, retry or
//! correct, all under one monotonic deadline.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use karu_config::Settings;
use tracing::Instrument;

use crate::batch::versions::VersionPins;
use crate::batch::{BatchShared, until_cancelled};
use crate::check::{Expectation, is_single_strong};
use crate::credentials::Authority;
use crate::hedge::HedgePolicy;
use crate::http::exchange::{Exchange, Failure, LastModified, Limits, Success};
use crate::http::hedging::{Race, outcome_of};
use crate::http::landing::Landing;
use crate::http::redirects::Reuse;
use crate::http::{LoopCtx, ReleasablePermits};
use crate::retry::{Decision, FailReason, FailureClass, RetryPolicy, RetryState};
use crate::sdk::{Correction, Credential, Error, Locator, PrepareContext, RangeSpec, Status};

/// Whether `headers` ask for exactly `range`: one `Range` header, equal to its value. What is
/// sent (and signed) is the header, so that is what must match.
fn asks_for(headers: &http::HeaderMap, range: RangeSpec) -> bool {
    let mut values = headers.get_all(http::header::RANGE).iter();
    match (values.next(), values.next()) {
        (Some(value), None) => value.as_bytes() == range.header_bytes().as_ref(),
        _ => false,
    }
}

/// What a fetch delivered into its destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fetched {
    /// Bytes from the first requested byte that are proven.
    pub(crate) available: u64,
    /// Whether the object ended before the requested last byte.
    pub(crate) ends_early: bool,
    /// The object's strong ETag, if any.
    pub(crate) etag: Option<String>,
    /// The object's size, when a response stated it.
    pub(crate) total: Option<u64>,
    /// The answer's `Last-Modified`, as sent.
    pub(crate) last_modified: LastModified,
}

/// One logical read of a range into a destination.
pub(crate) struct Fetch<'a> {
    pub(crate) locator: &'a Locator,
    pub(crate) range: RangeSpec,
    /// The caller's identity condition.
    pub(crate) if_match: Option<&'a str>,
    pub(crate) settings: &'a Settings,
    pub(crate) cancel: Option<&'a BatchShared>,
    /// The authority and the credential obtained for this read, if its backend authenticates.
    pub(crate) auth: Option<(Authority, Credential)>,
    /// When the read started: the deadline counts from here.
    pub(crate) started: Instant,
    /// Pins that keep this read to one version of the object beside the batch's: the parts of
    /// one split transfer share them ([`pieces`](super::pieces)). `None`: the batch's, if it
    /// keeps to one version.
    pub(crate) pins: Option<&'a VersionPins>,
    /// The permits this read runs on, handed back while it waits for another request's
    /// redirect location ([`ReleasablePermits`]); `None`: it keeps whatever it holds.
    pub(crate) held: Option<Arc<ReleasablePermits>>,
}

impl Fetch<'_> {
    /// Fetch `range` into `dst` with retries, resume and corrections, inside a `fetch` span
    /// (the object's redacted identity and the range: never a credential or a query).
    pub(crate) async fn run(self, ctx: &LoopCtx, dst: &mut dyn Landing) -> Result<Fetched, Error> {
        let span = tracing::debug_span!(
            target: "karu::http",
            "fetch",
            object = %self.locator.canonical(),
            range = %self.range.header_value(),
            pinned = self.if_match.is_some(),
        );
        // Entered on every poll only when a subscriber wants it: instrumenting moves the
        // attempts' future (~6 KiB) by value four times a read, which the plain `.await`
        // builds in place.
        let result = if span.is_disabled() {
            self.attempts(ctx, dst).await
        } else {
            self.attempts(ctx, dst).instrument(span.clone()).await
        };
        if let Err(e) = &result {
            span.in_scope(|| tracing::debug!(status = %e.status(), "fetch failed"));
        }
        result
    }

    async fn attempts(mut self, ctx: &LoopCtx, dst: &mut dyn Landing) -> Result<Fetched, Error> {
        let mut retry = RetryState::new(RetryPolicy::from(&self.settings.retry), self.started);
        let mut rng = fastrand::Rng::new();
        let client = ctx.client(self.settings);
        let limits = Limits::from(&self.settings.http);
        let backend = self.locator.backend().as_ref();
        // A batch that keeps to one version pins each object to the first strong ETag seen.
        let versions = self
            .pins
            .or_else(|| self.cancel.and_then(BatchShared::versions));
        let object = self.locator.canonical();
        let mut exchange = Exchange {
            client: &client,
            backend,
            limits,
            deadline: retry.deadline(),
            cancel: self.cancel,
            stats: &ctx.shared.stats,
            versions: versions.map(|v| (v, object)),
            reuse: Some(Reuse {
                locations: &ctx.shared.locations,
                flights: &ctx.shared.location_flights,
                locator: self.locator,
                snapshot: &ctx.shared.snapshot,
            }),
            held: self.held.as_deref(),
        };
        let endpoint = ctx.shared.endpoints.get(object.as_str());
        let hedging = HedgePolicy::from(&self.settings.hedge);
        let range = self.range;
        let if_match = self.if_match;
        // A caller's single strong tag already pins one version. Without a condition a resume
        // pins Karu's own saved tag; a wildcard or a list never resumes (see `keep_progress`).
        let caller_pins = if_match.is_some_and(is_single_strong);
        // Resume state: bytes already proven, the tag that pins their version, and the size
        // of the object the answers that delivered them stated.
        let mut kept: u64 = 0;
        let mut pin: Option<String> = None;
        let mut stated: Option<u64> = None;
        let mut region_hint: Option<String> = None;
        loop {
            let attempt = retry.start_attempt();
            dst.attempt(attempt);
            if attempt > 1 {
                ctx.shared.stats.retries.fetch_add(1, Ordering::Relaxed);
            }
            let batch_pin = versions.and_then(|v| v.get(object));
            let (range_now, condition) = match range {
                RangeSpec::Closed { first, last } if kept > 0 => (
                    RangeSpec::Closed {
                        first: first + kept,
                        last,
                    },
                    if caller_pins {
                        if_match
                    } else {
                        pin.as_deref()
                    },
                ),
                _ => (range, if_match.or(batch_pin.as_deref())),
            };
            // Prepared late, for this attempt (and again for each of its duplicates).
            let prepare = || {
                let prepared = backend.prepare(&PrepareContext {
                    locator: self.locator,
                    range: range_now,
                    if_match: condition,
                    snapshot: &ctx.shared.snapshot,
                    credential: self.auth.as_ref().map(|(_, c)| c),
                    region_hint: region_hint.as_deref(),
                    attempt,
                })?;
                if !asks_for(&prepared.headers, range_now) {
                    return Err(Error::internal(format!(
                        "the {} backend prepared a request without the Range header {}",
                        backend.name(),
                        range_now.header_value()
                    )));
                }
                Ok(prepared)
            };
            let prepared = prepare()?;
            let expect = Expectation {
                range: range_now,
                if_match: condition,
                fallback_limit: limits.fallback_limit,
                accepts_stored_gzip: prepared.options.accept_stored_gzip,
            };
            // A first request of this object in flight: wait for its location without any
            // room (no permit, no place in the window); the queue for permits again after it
            // counts no more than the queue before the read started.
            let requeued = exchange
                .await_flight(&prepared)
                .await
                .map_err(|f| f.error)?;
            if !requeued.is_zero() {
                retry.extend(requeued);
                exchange.deadline = retry.deadline();
            }
            // Room in the endpoint's window (adaptive concurrency), within the deadline: at
            // once when there is room (and the batch goes on), else waiting for it.
            let cancelled = self.cancel.is_some_and(BatchShared::is_cancelled);
            let ready = if cancelled {
                None
            } else {
                endpoint.try_admit(&hedging)
            };
            let admission = match ready {
                Some(admission) => admission,
                None => tokio::select! {
                    biased;
                    () = until_cancelled(self.cancel) => return Err(Failure::cancelled().error),
                    admission = endpoint.admit(&hedging) => admission,
                    () = tokio::time::sleep_until(retry.deadline().into()) => {
                        return Err(Error::new(
                            Status::TimedOut,
                            "the read's deadline passed while waiting for room among the requests in flight",
                        ));
                    }
                },
            };
            let attempt_started = admission.sent();
            let (result, admission) = if hedging.enabled {
                let race = Race {
                    ctx,
                    exchange: &exchange,
                    endpoint: &endpoint,
                    policy: hedging,
                    expect: &expect,
                    prepare: &prepare,
                };
                race.run(prepared, admission, &mut *dst, kept).await
            } else {
                let result = exchange
                    .run(prepared, &prepare, expect, &mut *dst, kept)
                    .await;
                (result, admission)
            };
            tracing::debug!(
                target: "karu::http",
                attempt,
                ms = attempt_started.elapsed().as_micros() as f64 / 1000.0,
                outcome = %match &result {
                    Ok(_) => Status::Ok,
                    Err(failure) => failure.error.status(),
                },
                "attempt ended"
            );
            admission.finish(match &result {
                Ok(success) => success.arrival.received(Instant::now()),
                Err(failure) => outcome_of(failure),
            });
            let failure = match result {
                Ok(success) => {
                    let total = resumed_total(range_now, kept, stated, &success)?;
                    return Ok(Fetched {
                        available: kept + success.delivered.available,
                        ends_early: success.delivered.ends_early,
                        etag: success.etag.or(pin),
                        total,
                        last_modified: success.last_modified,
                    });
                }
                Err(failure) => failure,
            };
            if failure.error.status() == Status::Cancelled {
                return Err(failure.error);
            }
            let own_pin_failed =
                failure.error.status() == Status::PreconditionFailed && !caller_pins && kept > 0;
            if own_pin_failed && versions.is_some() {
                // The object changed under a batch that keeps to one version: the read saw
                // another version, and starting over would only meet it again.
                return Err(failure.error);
            }
            let class = if own_pin_failed {
                // Karu's own saved tag stopped matching: the object changed. The partial data
                // is discarded and the range starts over, as an ordinary retry.
                tracing::debug!(
                    attempt,
                    "saved ETag no longer matches; discarding partial data"
                );
                kept = 0;
                pin = None;
                stated = None;
                FailureClass::Transport
            } else {
                self.keep_progress(&failure, &mut kept, &mut pin, &mut stated);
                failure.class
            };
            let decision = retry.handle_failure(
                class,
                failure.retry_after,
                attempt_started.elapsed(),
                Instant::now(),
                &mut rng,
            );
            tracing::debug!(
                attempt,
                ?decision,
                status = ?failure.error.status(),
                kept,
                "attempt failed"
            );
            match decision {
                Decision::Reprepare => {
                    if let Some(Correction::Reprepare { region }) = &failure.correction {
                        tracing::debug!(region = %region, "preparing again for a corrected region");
                        region_hint = Some(region.clone());
                    }
                }
                Decision::Reauthenticate => {
                    let Some((authority, stale)) = self.auth.take() else {
                        return Err(failure.error);
                    };
                    tracing::debug!("credential expired: authenticating again");
                    // Within the read's deadline, like every other step.
                    let fresh = ctx
                        .shared
                        .workers
                        .obtain(&authority, Some(&stale), retry.deadline(), self.cancel)
                        .await?;
                    self.auth = Some((authority, fresh));
                }
                Decision::RetryAfter(pause) => {
                    tracing::debug!(
                        attempt,
                        wait_ms = pause.as_millis() as u64,
                        "waiting before the next attempt"
                    );
                    let until = (Instant::now() + pause).min(retry.deadline());
                    let woke = tokio::select! {
                        biased;
                        () = until_cancelled(self.cancel) => false,
                        () = tokio::time::sleep_until(until.into()) => true,
                    };
                    if !woke {
                        return Err(Failure::cancelled().error);
                    }
                }
                Decision::Fail(reason) => {
                    let mut error = final_error(failure.error, reason, attempt);
                    if failure.class == FailureClass::Reauthenticate {
                        // A fresh credential was refused as expired too: a credential problem.
                        let message = error.message().to_string();
                        error = error.reworded(Status::Credentials, message);
                    }
                    return Err(error);
                }
            }
        }
    }

    /// Keep proven bytes for a resume only when one strong tag pins their version; otherwise
    /// the range restarts from its first byte. A caller's wildcard or tag list also restarts
    /// it: the condition may accept another version than the one the kept bytes came from.
    /// The size the kept bytes' answers stated (`stated`) goes with them: the resumed answers
    /// must agree with it, and partial ones that state another size restart the range.
    fn keep_progress(
        &self,
        failure: &Failure,
        kept: &mut u64,
        pin: &mut Option<String>,
        stated: &mut Option<u64>,
    ) {
        if failure.kept == 0 || !matches!(self.range, RangeSpec::Closed { .. }) {
            return;
        }
        if self.if_match.is_some_and(|c| !is_single_strong(c)) {
            *kept = 0;
            *pin = None;
            *stated = None;
            return;
        }
        let tag = failure
            .etag
            .clone()
            .filter(|t| is_single_strong(t))
            .or_else(|| {
                self.if_match
                    .filter(|c| is_single_strong(c))
                    .map(str::to_string)
            });
        // Two sizes stated under one tag: the tag does not tell the versions apart, and the
        // kept bytes may be of two of them.
        let sizes_agree = match (*stated, failure.total) {
            (Some(a), Some(b)) => a == b,
            _ => true,
        };
        match tag {
            Some(tag) if pin.as_deref().is_none_or(|p| p == tag) && sizes_agree => {
                *kept += failure.kept;
                *pin = Some(tag);
                *stated = stated.or(failure.total);
            }
            _ => {
                *kept = 0;
                *pin = None;
                *stated = None;
            }
        }
    }
}

/// The object size an answer proves, given the `kept` bytes a resumed read already holds
/// before `range_now` and the size the answers that delivered them `stated`: a 416 there says
/// the object ends exactly where they do. A size stated below them contradicts them, and so
/// does any size or end other than the one already stated (the resumed request carried their
/// ETag: it asked the same version).
fn resumed_total(
    range_now: RangeSpec,
    kept: u64,
    stated: Option<u64>,
    success: &Success,
) -> Result<Option<u64>, Error> {
    let RangeSpec::Closed { first: from, .. } = range_now else {
        return Ok(success.total);
    };
    if kept == 0 {
        return Ok(success.total);
    }
    let total = match success.total {
        Some(size) if size < from => {
            return Err(Error::new(
                Status::Protocol,
                format!(
                    "the server states a size of {size} bytes, before the {kept} bytes it \
                     already sent up to byte {from}"
                ),
            ));
        }
        None if success.delivered.ends_early && success.delivered.available == 0 => Some(from),
        total => total,
    };
    let Some(stated) = stated else {
        return Ok(total);
    };
    if success.delivered.ends_early {
        // The kept bytes reach `from`: the object ends exactly at the stated size.
        agrees_with_size(Some(stated), from + success.delivered.available, true)?;
    }
    match total {
        Some(size) if size != stated => Err(Error::new(
            Status::Protocol,
            format!(
                "the server stated a size of {stated} bytes, then answered the resumed request \
                 as if the object had {size} bytes"
            ),
        )),
        _ => Ok(Some(stated)),
    }
}

/// Refuse an answer that ends the object at byte `end` where an answer of the same read stated
/// its `size` otherwise: the server contradicts itself (a bare 416 inside the size, for one),
/// and believing the end would be a false end of object. `delivered`: the read has bytes
/// before `end`, so the object reaches it; without any, an object ending before `end` (a read
/// past the end) agrees. The rule of a resumed read's answers and of a split read's parts.
pub(crate) fn agrees_with_size(size: Option<u64>, end: u64, delivered: bool) -> Result<(), Error> {
    match size {
        Some(size) if size > end || (delivered && size != end) => Err(Error::new(
            Status::Protocol,
            format!(
                "the server stated a size of {size} bytes, then answered part of the read as if \
                 the object ended at byte {end}"
            ),
        )),
        _ => Ok(()),
    }
}

fn final_error(error: Error, reason: FailReason, attempts: u32) -> Error {
    let suffix = match reason {
        FailReason::Permanent => return error,
        FailReason::AttemptsExhausted => format!(" (gave up after {attempts} attempts)"),
        FailReason::DeadlineExhausted => format!(
            " (the read's deadline left no time for attempt {})",
            attempts + 1
        ),
        FailReason::CorrectionRepeated => " (a one-time correction was needed again)".to_string(),
    };
    let (status, message) = (error.status(), format!("{}{suffix}", error.message()));
    error.reworded(status, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::Delivered;

    fn answer(available: u64, ends_early: bool, total: Option<u64>) -> Success {
        Success {
            delivered: Delivered {
                available,
                ends_early,
            },
            etag: None,
            total,
            last_modified: LastModified::default(),
            arrival: Default::default(),
        }
    }

    #[test]
    fn a_resumed_read_learns_the_size_from_where_its_kept_bytes_end() {
        let resumed = RangeSpec::Closed {
            first: 1000,
            last: 1099,
        };
        // A 416 without a size right after 100 kept bytes: the object ends at byte 1000.
        let size = resumed_total(resumed, 100, None, &answer(0, true, None));
        assert_eq!(size, Ok(Some(1000)));
        assert_eq!(
            resumed_total(resumed, 100, None, &answer(0, true, Some(1000))),
            Ok(Some(1000))
        );
        // A stated size before bytes already received contradicts them.
        let e = resumed_total(resumed, 100, None, &answer(0, true, Some(999))).unwrap_err();
        assert_eq!(e.status(), Status::Protocol);
        // Without kept bytes, or with bytes delivered, the answer speaks for itself.
        assert_eq!(
            resumed_total(resumed, 0, None, &answer(0, true, None)),
            Ok(None)
        );
        assert_eq!(
            resumed_total(resumed, 100, None, &answer(100, false, None)),
            Ok(None)
        );
    }

    #[test]
    fn a_resumed_answer_must_agree_with_the_size_the_kept_bytes_answer_stated() {
        let resumed = RangeSpec::Closed {
            first: 1000,
            last: 1099,
        };
        // The kept bytes' answer stated 5,000 bytes: a bare 416 at byte 1,000 contradicts it
        // (ending the read there would be a false end of object).
        let e = resumed_total(resumed, 100, Some(5000), &answer(0, true, None)).unwrap_err();
        assert_eq!(e.status(), Status::Protocol);
        assert!(!e.is_transient(), "the server contradicts itself: {e}");
        // So does another size, and an end before or after the stated one.
        for other in [
            answer(100, false, Some(4999)),
            answer(100, false, Some(5001)),
            answer(50, true, None),
        ] {
            let e = resumed_total(resumed, 100, Some(5000), &other).unwrap_err();
            assert_eq!(e.status(), Status::Protocol, "{other:?}");
        }
        // Agreeing answers keep the stated size, whether or not they state it again.
        for agreeing in [answer(100, false, None), answer(100, false, Some(5000))] {
            assert_eq!(
                resumed_total(resumed, 100, Some(5000), &agreeing),
                Ok(Some(5000)),
                "{agreeing:?}"
            );
        }
        // The object ending exactly where the kept bytes do, as stated.
        assert_eq!(
            resumed_total(resumed, 100, Some(1000), &answer(0, true, None)),
            Ok(Some(1000))
        );
        assert_eq!(
            resumed_total(resumed, 100, Some(1050), &answer(50, true, Some(1050))),
            Ok(Some(1050))
        );
    }

    #[test]
    fn only_the_exact_range_header_is_sent() {
        use http::HeaderValue;
        use http::header::RANGE;
        let range = RangeSpec::Closed { first: 0, last: 9 };
        let mut headers = http::HeaderMap::new();
        assert!(!asks_for(&headers, range), "no Range header");
        headers.insert(RANGE, HeaderValue::from_static("bytes=0-9"));
        assert!(asks_for(&headers, range));
        assert!(!asks_for(
            &headers,
            RangeSpec::Closed { first: 0, last: 10 }
        ));
        assert!(!asks_for(&headers, RangeSpec::Suffix { len: 10 }));
        headers.append(RANGE, HeaderValue::from_static("bytes=0-9"));
        assert!(!asks_for(&headers, range), "two Range headers");
        headers.insert(RANGE, HeaderValue::from_static("bytes=0-9, 20-29"));
        assert!(!asks_for(&headers, range));
    }
}
