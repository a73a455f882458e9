//! One attempt: send a prepared request, check the answer, and receive exactly the proven
//! bytes into the destination. The driver around the pure [`crate::check`] module.

use std::sync::atomic::Ordering;
use std::task::Poll;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use http::header::{
    AUTHORIZATION, CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_RANGE, ETAG, HeaderName,
    LAST_MODIFIED, LOCATION, USER_AGENT,
};
use http::{HeaderMap, HeaderValue, Method, Request, Response, Uri};
use http_body_util::{BodyExt, Empty};
use hyper::body::Body as _;
use hyper::body::Incoming;
use karu_config::HttpSettings;
use tokio::time::sleep_until;

use crate::batch::versions::VersionPins;
use crate::batch::{BatchShared, released, until_cancelled};
use crate::check::{self, Delivered, Expectation, Receipt, ResponseHead, Verdict};
use crate::http::client::{Carrier, HttpClient};
use crate::http::endpoint::Arrival;
use crate::http::failure::{self, TransportKind};
use crate::http::landing::Landing;
use crate::http::redirects::{Leading, Replaced, Reuse, location_failed};
use crate::http::speed::LowSpeed;
use crate::http::{Held, RemoteStats};
use crate::retry::{FailureClass, RetryAfter};
use crate::sdk::{
    Backend, CanonicalPath, Correction, Error, ErrorResponse, Evidence, PreparedRequest, Rejection,
    Status, classify_status, error_body, redact,
};

/// Most redirects followed in one attempt.
const MAX_REDIRECTS: usize = 10;

/// Longest body summary in a message.
const SUMMARY_CHARS: usize = 300;

/// The `User-Agent` of a request whose backend set none.
const USER_AGENT_VALUE: &str = concat!("karu/", env!("CARGO_PKG_VERSION"));

/// The limits of one exchange, from the path's settings.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub(crate) fallback_limit: u64,
    pub(crate) drain_limit: u64,
    pub(crate) error_body_limit: u64,
    pub(crate) low_speed_limit: u64,
    pub(crate) low_speed_time: Duration,
}

impl From<&HttpSettings> for Limits {
    fn from(s: &HttpSettings) -> Self {
        Limits {
            fallback_limit: s.fallback_limit.0,
            drain_limit: s.drain_limit.0,
            error_body_limit: s.error_body_limit.0,
            low_speed_limit: s.low_speed_limit,
            low_speed_time: s.low_speed_time.0,
        }
    }
}

/// A successful exchange.
#[derive(Debug)]
pub(crate) struct Success {
    pub(crate) delivered: Delivered,
    pub(crate) etag: Option<String>,
    pub(crate) total: Option<u64>,
    /// The answer's `Last-Modified`, as sent.
    pub(crate) last_modified: LastModified,
    /// When its body arrived, for the endpoint's measurements.
    pub(crate) arrival: Arrival,
}

/// An answer's `Last-Modified` as it was sent, read only where it is reported (a stat, the
/// ends of an object): parsing the date cost more than the rest of an answer's checks, on
/// every answer, and reads never report it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LastModified(Option<HeaderValue>);

impl LastModified {
    /// The header in `headers`, if there is one.
    fn of(headers: &HeaderMap) -> Self {
        LastModified(headers.get(LAST_MODIFIED).cloned())
    }

    /// When the object was last modified, if the header held a valid HTTP date.
    pub(crate) fn time(&self) -> Option<SystemTime> {
        let text = self.0.as_ref()?.to_str().ok()?;
        httpdate::parse_http_date(text).ok()
    }

    /// Whether the answer sent one.
    pub(crate) fn is_sent(&self) -> bool {
        self.0.is_some()
    }
}

/// A failed exchange, with what the retry policy and resume need.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) error: Error,
    pub(crate) class: FailureClass,
    pub(crate) retry_after: Option<Duration>,
    /// Proven bytes already written to the destination (a resume can keep them).
    pub(crate) kept: u64,
    /// The strong ETag of the response that delivered `kept`.
    pub(crate) etag: Option<String>,
    /// The object's size as the response that delivered `kept` stated it.
    pub(crate) total: Option<u64>,
    pub(crate) correction: Option<Correction>,
}

impl Failure {
    pub(super) fn new(error: Error, class: FailureClass) -> Self {
        Failure {
            error,
            class,
            retry_after: None,
            kept: 0,
            etag: None,
            total: None,
            correction: None,
        }
    }

    fn transport(
        kind: TransportKind,
        host: &str,
        cause: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        let class = kind.class();
        let error = Error::new(kind.status(), format!("{kind} ({host})"))
            .with_source(cause)
            .with_transient(class != FailureClass::Permanent);
        Failure::new(error, class)
    }

    fn timed_out(what: &str, host: &str) -> Self {
        Failure::new(
            Error::new(Status::TimedOut, format!("{what} ({host})")),
            FailureClass::Transport,
        )
    }

    pub(crate) fn cancelled() -> Self {
        Failure::new(released(), FailureClass::Permanent)
    }
}

/// How an attempt's request is prepared (again, for a duplicate or a redirect): late, signed
/// afresh with the attempt's credential.
pub(crate) type Prepare<'x> = dyn Fn() -> Result<PreparedRequest, Error> + Sync + 'x;

/// Everything an exchange needs besides the request and the destination.
pub(crate) struct Exchange<'a> {
    pub(crate) client: &'a HttpClient,
    pub(crate) backend: &'a dyn Backend,
    pub(crate) limits: Limits,
    pub(crate) deadline: Instant,
    pub(crate) cancel: Option<&'a BatchShared>,
    pub(crate) stats: &'a RemoteStats,
    /// The batch's version pins and the object, when the batch keeps to one version.
    pub(crate) versions: Option<(&'a VersionPins, &'a CanonicalPath)>,
    /// The client's reusable redirect locations and what the backend needs to judge one.
    pub(crate) reuse: Option<Reuse<'a>>,
    /// The permits the request runs on, handed back while it waits for another request's
    /// location (see [`Held`]).
    pub(crate) held: Option<&'a Held>,
}

impl<'a> Exchange<'a> {
    /// Run one attempt. The kept bytes land in `dst` from span offset `base` (the bytes a
    /// resumed read already has come before it).
    pub(crate) async fn run(
        &self,
        request: PreparedRequest,
        again: &Prepare<'_>,
        expect: Expectation<'_>,
        dst: &mut dyn Landing,
        base: u64,
    ) -> Result<Success, Failure> {
        let headed = self.head(request, again, &expect, Route::Any, None).await?;
        self.land(headed, dst, base).await
    }

    /// Send a prepared request, follow its redirects and check the head of the final answer
    /// (its status and headers, the batch's version pin, what a redirect said of the object):
    /// an answer whose head passed the checks, its body not yet read, or the failure. Nothing
    /// lands anywhere yet, so of several requests for one range only the one
    /// [landed](Self::land) writes the destination. A redirect asks its location with the
    /// headers of the request prepared `again` (nothing of a request is kept for a redirect
    /// that seldom comes: a copy of its headers cost ~800 instructions on every request).
    ///
    /// A caller whose own timer wakes its task `polled_by` some instant (a request that may be
    /// hedged, see [`hedging`](super::hedging)) polls this exchange again by then: until then
    /// the exchange registers no timer of its own that is due later.
    pub(crate) async fn head(
        &self,
        request: PreparedRequest,
        again: &Prepare<'_>,
        expect: &Expectation<'_>,
        route: Route,
        polled_by: Option<Instant>,
    ) -> Result<Headed<'a>, Failure> {
        // A location kept for this object replaces the prepared URL. Its key is built here
        // only if there may be one to find; otherwise at the first redirect, to keep it.
        let mut key = self.location_key_if_kept(&request);
        let PreparedRequest {
            mut url,
            mut headers,
            options,
            ..
        } = request;
        // The prepared URL's origin, built when a request leaves it.
        let mut origin: Option<String> = None;
        let mut replaced = None;
        // Ends this request's flight, if it leads one, when the exchange ends however it ends.
        let mut leading = None;
        // Whether the request left the prepared origin: its credentials stay behind from then
        // on, wherever a redirect goes next.
        let mut stripped = false;
        if let (Some(reuse), Some(key)) = (self.reuse, &key) {
            let mut kept = reuse.locations.lock().poll_location(key, Instant::now());
            // A duplicate never joins a flight: it may be its own original's.
            if kept.is_none() && options.resolve_once && route == Route::Any {
                let (location, lead) = Box::pin(self.join_flight(reuse, key)).await?;
                kept = location;
                leading = lead;
            }
            if let Some(location) = kept {
                tracing::debug!(host = %host_of(&location), "reusing a redirect location");
                let prepared = std::mem::replace(&mut url, location);
                let prepared_origin = origin.insert(origin_of(&prepared));
                replaced = Some(Replaced {
                    url: prepared,
                    headers: headers.clone(),
                });
                if origin_of(&url) != *prepared_origin {
                    strip_credentials(&mut headers, &options.sensitive_headers);
                    stripped = true;
                }
            }
        }
        let mut redirected = false;
        // The last redirect's headers: what it said about the object, checked against the end.
        let mut linked: Option<HeaderMap> = None;
        for _hop in 0..=MAX_REDIRECTS {
            let host = host_of(&url);
            // Karu's own `User-Agent` unless the backend set one (or a redirect to another
            // origin stripped it as a configured header).
            if !headers.contains_key(USER_AGENT) {
                headers.insert(USER_AGENT, HeaderValue::from_static(USER_AGENT_VALUE));
            }
            let sent = std::mem::take(&mut headers);
            // Low-speed protection counts from the request: waiting for the head counts.
            let sent_at = Instant::now();
            let speed = self.low_speed(sent_at);
            let answer = self
                .send(url.clone(), sent, host, &speed, route, polled_by)
                .await?;
            let status = answer.response.status().as_u16();
            tracing::debug!(
                target: "karu::http",
                status,
                ms = sent_at.elapsed().as_micros() as f64 / 1000.0,
                "response"
            );
            if location_failed(status)
                && let Some(back) = replaced.take()
            {
                // The reused location expired or was revoked: back to the prepared URL, once.
                tracing::debug!(status, "a reused location failed; asking the prepared URL");
                Box::pin(self.discard(answer, 0)).await;
                if let (Some(reuse), Some(key)) = (self.reuse, &key) {
                    reuse.locations.lock().forget(key);
                }
                url = back.url;
                headers = back.headers;
                continue;
            }
            if options.follow_redirects && is_redirect(status) {
                let Some(next) = redirect_target(&url, answer.response.headers()) else {
                    return Err(Failure::new(
                        Error::new(
                            Status::Protocol,
                            format!("a {status} redirect without a usable Location ({host})"),
                        ),
                        FailureClass::Permanent,
                    ));
                };
                headers = again()
                    .map_err(|error| Failure::new(error, FailureClass::Permanent))?
                    .headers;
                if !redirected && key.is_none() {
                    // Still the prepared URL and headers: the key to keep the location under.
                    key = self.location_key(&url, &headers, &options);
                }
                linked = Some(answer.response.headers().clone());
                Box::pin(self.discard(answer, 0)).await;
                let prepared_origin = origin.get_or_insert_with(|| origin_of(&url));
                stripped |= origin_of(&next) != *prepared_origin;
                if stripped {
                    // Credentials never follow a redirect to another origin.
                    strip_credentials(&mut headers, &options.sensitive_headers);
                }
                url = next;
                redirected = true;
                continue;
            }
            let answered = self.check(answer, expect, host, linked.as_ref()).await?;
            let keep = match (self.reuse, key) {
                (Some(reuse), Some(key)) if redirected => Some((reuse, key)),
                _ => None,
            };
            return Ok(Headed {
                answered,
                url,
                speed,
                keep,
                _leading: leading,
            });
        }
        Err(Failure::new(
            Error::new(
                Status::Protocol,
                format!("more than {MAX_REDIRECTS} redirects ({})", host_of(&url)),
            ),
            FailureClass::Permanent,
        ))
    }

    /// Receive an answer whose head passed the checks: its kept bytes land in `dst` from span
    /// offset `base`. A redirected request's final location is kept once it succeeded.
    pub(crate) async fn land(
        &self,
        headed: Headed<'a>,
        dst: &mut dyn Landing,
        base: u64,
    ) -> Result<Success, Failure> {
        let Headed {
            answered,
            url,
            mut speed,
            keep,
            _leading,
        } = headed;
        let result = match answered {
            Answered::Done(success) => Ok(success),
            Answered::Body {
                answer,
                receipt,
                last_modified,
            } => {
                let host = host_of(&url);
                self.receive(answer, receipt, dst, base, host, &mut speed)
                    .await
                    .map(|success| Success {
                        last_modified,
                        ..success
                    })
            }
        };
        if result.is_ok()
            && let Some((reuse, key)) = keep
        {
            self.keep_location(reuse, key, &url);
        }
        result
    }

    /// The low-speed state of an exchange starting at `now`.
    fn low_speed(&self, now: Instant) -> LowSpeed {
        LowSpeed::new(self.limits.low_speed_limit, self.limits.low_speed_time, now)
    }

    /// When to stop waiting if no byte arrives: the low-speed abort time or the deadline.
    fn wake_at(&self, speed: &LowSpeed) -> Instant {
        speed
            .poll_abort_at()
            .map_or(self.deadline, |at| at.min(self.deadline))
    }

    async fn send(
        &self,
        url: Uri,
        headers: HeaderMap,
        host: &str,
        speed: &LowSpeed,
        route: Route,
        polled_by: Option<Instant>,
    ) -> Result<Answer, Failure> {
        // Target `karu::http` (not the module path): what `karu -v` shows, whatever the
        // layout of the modules. The URL without its query or user information, the range,
        // never another header.
        tracing::debug!(
            target: "karu::http",
            method = "GET",
            url = %redact::uri(&url),
            range = headers
                .get(http::header::RANGE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("-"),
            "request"
        );
        // Set in place: the builder moves the request's parts by value at every step, and
        // nothing here can fail.
        let mut request = Request::new(Empty::<Bytes>::new());
        *request.method_mut() = Method::GET;
        *request.uri_mut() = url;
        *request.headers_mut() = headers;
        self.stats.requests.fetch_add(1, Ordering::Relaxed);
        // No body byte arrives while waiting for the head.
        let headers_by = self.wake_at(speed);
        tokio::select! {
            biased;
            () = until_cancelled(self.cancel) => Err(Failure::cancelled()),
            result = self.client.request(request, route == Route::Fresh) => match result {
                Ok((response, carrier)) => Ok(Answer { response, carrier }),
                Err(e) => {
                    let kind = if e.refused_http2() {
                        // Whatever the HTTP/2 layer made of it: the server does not speak it.
                        TransportKind::NotHttp2
                    } else {
                        failure::classify(&e, e.is_connect())
                    };
                    tracing::debug!(host, ?kind, "transport failure");
                    Err(Failure::transport(kind, host, e))
                }
            },
            () = sleep_from(headers_by, polled_by) => Err(if Instant::now() >= self.deadline {
                Failure::timed_out("the read's deadline passed while waiting for a response", host)
            } else {
                Failure::timed_out("no response within the low-speed time", host)
            }),
        }
    }

    /// The checks of an answer's head: the verdict on its status and headers, the batch's
    /// version pin, what the last redirect said of the object. A 416 is read to its end here
    /// (no byte of it lands anywhere); an error status's body is read for the failure.
    async fn check(
        &self,
        answer: Answer,
        expect: &Expectation<'_>,
        host: &str,
        linked: Option<&HeaderMap>,
    ) -> Result<Answered, Failure> {
        let status = answer.response.status().as_u16();
        let headers = answer.response.headers();
        let text = |name| {
            headers
                .get(name)
                .and_then(|v: &http::HeaderValue| v.to_str().ok())
        };
        let head = ResponseHead {
            status,
            content_range: text(CONTENT_RANGE),
            content_length: text(CONTENT_LENGTH).and_then(check::header_number),
            content_encoding: text(CONTENT_ENCODING),
            etag: text(ETAG),
            transformed: self.backend.transformed(headers),
        };
        let last_modified = LastModified::of(headers);
        let verdict = check::check_head(expect, &head);
        if let Some(failure) = self.keep_to_one_version(&verdict, status) {
            answer.abandon();
            return Err(failure);
        }
        if let Some(redirect) = linked {
            let (total, etag) = match &verdict {
                Verdict::Receive(receipt) => (receipt.total, receipt.etag.as_deref()),
                Verdict::Unsatisfiable { size, etag } => (*size, etag.as_deref()),
                Verdict::ErrorStatus(_) | Verdict::Reject(_) => (None, None),
            };
            let contradiction = (total.is_some() || etag.is_some())
                .then(|| self.backend.redirect_contradiction(redirect, total, etag))
                .flatten();
            if let Some(why) = contradiction {
                answer.abandon();
                return Err(Failure::new(
                    Error::new(
                        Status::Protocol,
                        format!("the redirect and the answer disagree: {why} ({host})"),
                    ),
                    FailureClass::Permanent,
                ));
            }
        }
        match verdict {
            Verdict::Receive(receipt) => Ok(Answered::Body {
                answer,
                receipt,
                last_modified,
            }),
            Verdict::Unsatisfiable { size, etag } => {
                let size = match size {
                    Some(size) => {
                        Box::pin(self.discard(answer, 0)).await;
                        Some(size)
                    }
                    // An S3-style error body may state the size the header did not.
                    None => {
                        let body =
                            Box::pin(self.discard(answer, self.limits.error_body_limit)).await;
                        check::check_unsatisfiable(expect.range, check::actual_object_size(&body))
                            .map_err(|rejection| rejected(rejection, status))?
                    }
                };
                Ok(Answered::Done(Success {
                    delivered: Delivered {
                        available: 0,
                        ends_early: true,
                    },
                    etag,
                    total: size,
                    last_modified,
                    arrival: Arrival::default(),
                }))
            }
            Verdict::ErrorStatus(code) => {
                Err(Box::pin(self.error_status(code, answer, host)).await)
            }
            Verdict::Reject(rejection) => {
                // Never download what cannot be used: the connection is closed.
                answer.abandon();
                Err(rejected(rejection, status))
            }
        }
    }

    /// Receive the body of an answer the head check accepted into `dst`.
    async fn receive(
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
            arrival.headed(Instant::now());
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

    /// In a batch that keeps to one version, pin the object to this answer's strong ETag if
    /// none is pinned yet, or refuse an answer from another version (one already in flight
    /// when the pin was set, or from a server that ignored `If-Match`).
    fn keep_to_one_version(&self, verdict: &Verdict, status: u16) -> Option<Failure> {
        let (versions, object) = self.versions?;
        let etag = match verdict {
            Verdict::Receive(receipt) => receipt.etag.as_deref(),
            Verdict::Unsatisfiable { etag, .. } => etag.as_deref(),
            Verdict::ErrorStatus(_) | Verdict::Reject(_) => None,
        }?;
        let pinned = versions.settle(object, etag).err()?;
        let error = Error::new(
            Status::PreconditionFailed,
            format!(
                "{object} changed during the batch: this answer's ETag {etag} is not the \
                 {pinned} of its first answer"
            ),
        )
        .with_evidence(Evidence::Response(Rejection::Changed {
            required: pinned.to_string(),
            actual: etag.to_string(),
        }));
        Some(Failure::new(
            error.with_http_status(status),
            FailureClass::Permanent,
        ))
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

    /// Read an error answer: keep the first bytes for the message and for the backend's
    /// correction hook, drain a small rest.
    async fn error_status(&self, code: u16, answer: Answer, host: &str) -> Failure {
        let headers = answer.response.headers().clone();
        let body = self.discard(answer, self.limits.error_body_limit).await;
        let class = classify_status(code);
        let correction = self.backend.correction(&ErrorResponse {
            status: code,
            headers: &headers,
            body: &body,
        });
        let retry_after = headers
            .get(http::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(RetryAfter::parse)
            .map(|r| r.wait(std::time::SystemTime::now()));
        let summary = error_body::summary(&body, SUMMARY_CHARS);
        let mut message = if summary.is_empty() {
            format!("the server answered {code} ({host})")
        } else {
            format!("the server answered {code}: {summary} ({host})")
        };
        let hint = self.backend.error_hint(&ErrorResponse {
            status: code,
            headers: &headers,
            body: &body,
        });
        if let Some(hint) = hint {
            message = format!(
                "{message}: {}",
                error_body::summary(hint.as_bytes(), SUMMARY_CHARS)
            );
        }
        let failure_class = match &correction {
            Some(Correction::Reprepare { .. }) => FailureClass::Reprepare,
            Some(Correction::Reauthenticate) => FailureClass::Reauthenticate,
            None if class.retryable => FailureClass::RetryableStatus(code),
            None => FailureClass::Permanent,
        };
        Failure {
            retry_after,
            correction,
            ..Failure::new(
                Error::new(class.status, message).with_http_status(code),
                failure_class,
            )
        }
    }

    /// Read up to `keep` bytes of a body and return them. The rest is unwanted: read to the
    /// end (so the connection can be reused) when it is at most the drain limit, else the
    /// body is dropped, which closes the connection.
    async fn discard(&self, answer: Answer, keep: u64) -> Vec<u8> {
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

/// Which connection a request may go on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    /// Any: an idle one of its host, or a new one.
    Any,
    /// A duplicate of a request still waiting ([`hedging`](super::hedging)): a new connection
    /// where the pool has room for one (so a slow server or path is avoided), else an idle
    /// one; never its original's, which is busy with it. It never waits for another
    /// request's redirect location.
    Fresh,
}

/// An answer whose head passed the checks ([`Exchange::head`]), its body not yet received.
pub(crate) struct Headed<'a> {
    answered: Answered,
    /// The URL that answered.
    url: Uri,
    /// The low-speed state since its request was sent.
    speed: LowSpeed,
    /// Where to keep a redirected request's final location once it succeeded.
    keep: Option<(Reuse<'a>, crate::http::locations::LocationKey)>,
    /// The flight this request leads, if it does: it ends when the exchange does.
    _leading: Option<Leading<'a>>,
}

/// What a head that passed the checks leaves to do.
// Moved once, from the check to the landing: boxing the answer would cost an allocation per
// request.
#[allow(clippy::large_enum_variant)]
enum Answered {
    /// Receive the body the receipt describes.
    Body {
        answer: Answer,
        receipt: Receipt,
        /// The answer's `Last-Modified`, as sent.
        last_modified: LastModified,
    },
    /// Nothing: the answer said where the object ends (a 416), and its body was read.
    Done(Success),
}

/// A response and the connection that carried it, as `send` returns them, so that whoever
/// abandons the body can close the connection.
struct Answer {
    response: Response<Incoming>,
    carrier: Carrier,
}

impl Answer {
    /// Drop a response whose body is not wanted, closing its HTTP/1 connection.
    fn abandon(mut self) {
        self.carrier.close();
        drop(self.response);
    }
}

/// The failure of a response the check refused: permanent, with the server's status.
fn rejected(rejection: Rejection, status: u16) -> Failure {
    let error = Error::from(rejection).with_http_status(status);
    Failure::new(error, FailureClass::Permanent)
}

/// Remove what must never go to another origin: `Authorization` and the backend's sensitive
/// headers.
fn strip_credentials(headers: &mut HeaderMap, sensitive: &[HeaderName]) {
    headers.remove(AUTHORIZATION);
    for name in sensitive {
        headers.remove(name);
    }
}

fn is_redirect(status: u16) -> bool {
    matches!(status, 301 | 302 | 303 | 307 | 308)
}

fn redirect_target(base: &Uri, headers: &HeaderMap) -> Option<Uri> {
    let location = headers.get(LOCATION)?.to_str().ok()?;
    let base = url::Url::parse(&base.to_string()).ok()?;
    let next = base.join(location).ok()?;
    if !matches!(next.scheme(), "http" | "https") {
        return None;
    }
    next.as_str().parse().ok()
}

/// `scheme://host:port` of a URL (default ports made explicit), for origin comparisons.
fn origin_of(url: &Uri) -> String {
    let scheme = url.scheme_str().unwrap_or("");
    let port = url
        .port_u16()
        .unwrap_or(if scheme == "https" { 443 } else { 80 });
    format!(
        "{scheme}://{}:{port}",
        url.host().unwrap_or("").to_ascii_lowercase()
    )
}

/// Resolves at `at`. While the task is sure to be polled again by `polled_by` (before `at`),
/// no timer is registered: a request that may be hedged has its hedging timer, and most
/// answers come before it is due, so a second timer of the request's would be registered and
/// dropped unused (~700 instructions) on nearly every request. Polled again at or after
/// `polled_by`, it registers its timer as `sleep_until` does.
async fn sleep_from(at: Instant, polled_by: Option<Instant>) {
    if let Some(by) = polled_by.filter(|&by| by < at) {
        // No waker is kept: the caller's own timer wakes the task by `by`.
        std::future::poll_fn(|_| {
            if Instant::now() >= by {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await;
    }
    sleep_until(at.into()).await;
}

/// `host:port` for messages (never the path or query). Found on every request: a byte scan
/// of the few bytes of an authority, where `rsplit('@')` took ~220 instructions.
fn host_of(url: &Uri) -> &str {
    let Some(authority) = url.authority().map(|a| a.as_str()) else {
        return "";
    };
    match authority.bytes().rposition(|b| b == b'@') {
        Some(at) => &authority[at + 1..],
        None => authority,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins() {
        let a: Uri = "https://Example.com/a".parse().unwrap();
        let b: Uri = "https://example.com:443/b?x".parse().unwrap();
        let c: Uri = "http://example.com/a".parse().unwrap();
        assert_eq!(origin_of(&a), origin_of(&b));
        assert_ne!(origin_of(&a), origin_of(&c));
        let u: Uri = "http://user:pw@h:81/p?q".parse().unwrap();
        assert_eq!(host_of(&u), "h:81");
    }

    #[test]
    fn the_default_limits_are_the_contracts() {
        let limits = Limits::from(&HttpSettings::default());
        assert_eq!(limits.fallback_limit, 8_388_608);
        assert_eq!(limits.drain_limit, 262_144);
        assert_eq!(limits.error_body_limit, 4_096);
        assert_eq!(limits.low_speed_limit, 1_024);
        assert_eq!(limits.low_speed_time, Duration::from_secs(60));
    }

    #[test]
    fn redirect_targets() {
        let base: Uri = "http://h/a/b?sig=1".parse().unwrap();
        let mut headers = HeaderMap::new();
        headers.insert(LOCATION, "../c".parse().unwrap());
        assert_eq!(
            redirect_target(&base, &headers).unwrap().to_string(),
            "http://h/c"
        );
        headers.insert(LOCATION, "https://other/x".parse().unwrap());
        assert_eq!(
            redirect_target(&base, &headers).unwrap().to_string(),
            "https://other/x"
        );
        headers.insert(LOCATION, "ftp://other/x".parse().unwrap());
        assert!(redirect_target(&base, &headers).is_none());
    }
}
