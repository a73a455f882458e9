//! What an exchange ends with: a [`Success`] (with the answer's [`LastModified`]) or a
//! [`Failure`] carrying what the retry policy and a resume need.

use std::time::{Duration, SystemTime};

use http::header::LAST_MODIFIED;
use http::{HeaderMap, HeaderValue};

use crate::batch::released;
use crate::check::Delivered;
use crate::http::endpoint::Arrival;
use crate::http::failure::TransportKind;
use crate::retry::FailureClass;
use crate::sdk::{Correction, Error, Rejection, Status};

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
    pub(super) fn of(headers: &HeaderMap) -> Self {
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
    pub(in crate::http) fn new(error: Error, class: FailureClass) -> Self {
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

    pub(super) fn transport(
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

    pub(super) fn timed_out(what: &str, host: &str) -> Self {
        Failure::new(
            Error::new(Status::TimedOut, format!("{what} ({host})")),
            FailureClass::Transport,
        )
    }

    pub(crate) fn cancelled() -> Self {
        Failure::new(released(), FailureClass::Permanent)
    }
}

/// The failure of a response the check refused: permanent, with the server's status.
pub(super) fn rejected(rejection: Rejection, status: u16) -> Failure {
    let error = Error::from(rejection).with_http_status(status);
    Failure::new(error, FailureClass::Permanent)
}
