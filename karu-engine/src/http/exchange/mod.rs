//! One attempt: send a prepared request, check the answer, and receive exactly the proven
//! bytes into the destination. The driver around the pure [`crate::check`] module.
//!
//! The files, one job each: [`redirect`] (send a request and follow its redirects, from a
//! reused location when one is kept, with credentials stripped across origins), [`origin`]
//! (origins, and the headers that never cross to another), [`send`] (one request on the
//! wire, under the low-speed and deadline timers), [`head_check`] (the checks of an answer's
//! head), [`version_pin`] (a batch's pin to one version of an object), [`body`] (receiving
//! a body, or reading an unwanted one away), [`error_status`] (an error answer's body made
//! into a failure) and [`outcome`] (what an exchange ends with). This file holds the exchange
//! itself and the states between its head and its body.

mod body;
mod error_status;
mod head_check;
mod origin;
mod outcome;
mod redirect;
mod send;
mod version_pin;

use std::time::{Duration, Instant};

use http::{Response, Uri};
use hyper::body::Incoming;
use karu_config::HttpSettings;

use crate::batch::BatchShared;
use crate::batch::versions::VersionPins;
use crate::check::{Expectation, Receipt};
use crate::http::client::{Carrier, HttpClient};
use crate::http::landing::Landing;
use crate::http::redirects::{Leading, Reuse};
use crate::http::speed::LowSpeed;
use crate::http::{ReleasablePermits, RemoteStats};
use crate::sdk::{Backend, CanonicalPath, Error, PreparedRequest};

pub(crate) use outcome::{Failure, LastModified, Success};

use origin::host_of;

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
    /// location (see [`ReleasablePermits`]).
    pub(crate) held: Option<&'a ReleasablePermits>,
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
        let head_received = self.head(request, again, &expect, Route::Any, None).await?;
        self.land(head_received, dst, base).await
    }

    /// Receive an answer whose head passed the checks: its kept bytes land in `dst` from span
    /// offset `base`. A redirected request's final location is kept once it succeeded.
    pub(crate) async fn land(
        &self,
        head_received: HeadReceived<'a>,
        dst: &mut dyn Landing,
        base: u64,
    ) -> Result<Success, Failure> {
        let HeadReceived {
            outcome,
            url,
            mut speed,
            keep,
            _leading,
        } = head_received;
        let result = match outcome {
            HeadOutcome::Done(success) => Ok(success),
            HeadOutcome::Body {
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
pub(crate) struct HeadReceived<'a> {
    outcome: HeadOutcome,
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
enum HeadOutcome {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_limits_are_the_contracts() {
        let limits = Limits::from(&HttpSettings::default());
        assert_eq!(limits.fallback_limit, 8_388_608);
        assert_eq!(limits.drain_limit, 262_144);
        assert_eq!(limits.error_body_limit, 4_096);
        assert_eq!(limits.low_speed_limit, 1_024);
        assert_eq!(limits.low_speed_time, Duration::from_secs(60));
    }
}
