//! One request on the wire: sent on the client's connections, its head awaited under the
//! low-speed time and the read's deadline (and the batch's cancellation).

use std::sync::atomic::{AtomicBool, Ordering};
use std::task::Poll;
use std::time::Instant;

use bytes::Bytes;
use http::{HeaderMap, Method, Request, Uri};
use http_body_util::Empty;
use tokio::time::sleep_until;

use super::{Answer, Exchange, Failure, Route};
use crate::batch::until_cancelled;
use crate::http::failure::{self, TransportKind};
use crate::http::speed::LowSpeed;
use crate::sdk::redact;

impl Exchange<'_> {
    /// The low-speed state of an exchange starting at `now`.
    pub(super) fn low_speed(&self, now: Instant) -> LowSpeed {
        LowSpeed::new(self.limits.low_speed_limit, self.limits.low_speed_time, now)
    }

    /// When to stop waiting if no byte arrives: the low-speed abort time or the deadline.
    pub(super) fn wake_at(&self, speed: &LowSpeed) -> Instant {
        speed
            .poll_abort_at()
            .map_or(self.deadline, |at| at.min(self.deadline))
    }

    /// Send one request and wait for its head; `duplicate`: the first request of a duplicate
    /// (hedging), counted as one when a connection takes it.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn send(
        &self,
        url: Uri,
        headers: HeaderMap,
        host: &str,
        speed: &LowSpeed,
        route: Route,
        duplicate: bool,
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
        // An attempt counts once: when a connection takes the request, or when it ends before
        // one did (a failed connect, a timeout). One given up before a connection took it (a
        // duplicate whose original answered while its connection was being opened, a
        // cancelled batch) never reached the server and does not count.
        let counted = AtomicBool::new(false);
        let count = || {
            if counted.swap(true, Ordering::Relaxed) {
                return;
            }
            self.stats.requests.fetch_add(1, Ordering::Relaxed);
            if duplicate {
                self.stats.hedges.fetch_add(1, Ordering::Relaxed);
                if let Some(batch) = self.cancel {
                    batch.add_hedge();
                }
            }
        };
        // No body byte arrives while waiting for the head.
        let headers_by = self.wake_at(speed);
        tokio::select! {
            biased;
            () = until_cancelled(self.cancel) => Err(Failure::cancelled()),
            result = self.client.request(request, route == Route::Fresh, count) => match result {
                Ok((response, carrier)) => Ok(Answer { response, carrier }),
                Err(e) => {
                    count();
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
            () = sleep_from(headers_by, polled_by) => {
                count();
                Err(if Instant::now() >= self.deadline {
                    Failure::timed_out("the read's deadline passed while waiting for a response", host)
                } else {
                    Failure::timed_out("no response within the low-speed time", host)
                })
            }
        }
    }
}

/// Resolves at `at`. While the task is sure to be polled again by `polled_by` (before `at`),
/// no timer is registered: a request that may be hedged has its hedging timer, and most
/// answers come before it is due, so a second timer of the request's would be registered and
/// dropped unused on nearly every request. Polled again at or after
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
