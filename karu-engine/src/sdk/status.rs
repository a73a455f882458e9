//! The status of one read, and the error that carries a failed status with its evidence.

use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;

use crate::sdk::evidence::Evidence;

/// The outcome class of one original read, with stable numbers for the C ABI.
///
/// Every [`Completion`](crate::Completion) carries exactly one status. A status other than
/// [`Status::Ok`] belongs to that read alone: the other reads of the batch are unaffected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u32)]
#[non_exhaustive]
pub enum Status {
    /// The requested bytes arrived, proven by the response (or the file read) to be exactly them.
    Ok = 0,
    /// The request was malformed: an address no backend accepts, a bad option, a destination
    /// too small for its read, or an object whose representation cannot be addressed.
    InvalidArgument = 1,
    /// The range itself was invalid: zero length, unbounded length, `offset + length`
    /// overflowing `u64`, or a read leaving its bounded window. Nothing was fetched for it.
    InvalidRange = 2,
    /// The range reaches beyond the end of the object. The bytes that exist (possibly none) form
    /// a valid prefix of the destination; `bytes_received` says how many.
    RangeNotSatisfiable = 3,
    /// The object (or file) does not exist.
    NotFound = 4,
    /// Access was denied: a local permission failure, or HTTP 401/403.
    PermissionDenied = 5,
    /// The local path names a directory, not a file.
    IsDirectory = 6,
    /// The object no longer matches the read's `if_match` condition (HTTP 412, or an ETag
    /// mismatch Karu detected itself).
    PreconditionFailed = 7,
    /// Credentials could not be obtained or were refused.
    Credentials = 8,
    /// The server answered with an HTTP status Karu does not retry, or retries ran out on one.
    Http = 9,
    /// The network failed (connect, send, receive, TLS) and retries ran out.
    Network = 10,
    /// The read's deadline, or a connect or low-speed limit, expired.
    TimedOut = 11,
    /// The response did not prove it held the requested bytes: a missing or wrong
    /// `Content-Range`, a truncated or transformed body, or an ignored range beyond the
    /// fallback limit.
    Protocol = 12,
    /// The batch was released before this read completed.
    Cancelled = 13,
    /// No backend is registered for the address, or the backend cannot do this operation
    /// (a local FIFO, socket or terminal cannot be read at an offset).
    Unsupported = 14,
    /// Any other local input/output failure.
    Io = 15,
    /// A bug in Karu: an invariant did not hold. Reported instead of panicking.
    Internal = 16,
}

impl Status {
    /// Every status, in numeric order.
    pub const ALL: [Status; 17] = [
        Status::Ok,
        Status::InvalidArgument,
        Status::InvalidRange,
        Status::RangeNotSatisfiable,
        Status::NotFound,
        Status::PermissionDenied,
        Status::IsDirectory,
        Status::PreconditionFailed,
        Status::Credentials,
        Status::Http,
        Status::Network,
        Status::TimedOut,
        Status::Protocol,
        Status::Cancelled,
        Status::Unsupported,
        Status::Io,
        Status::Internal,
    ];

    /// The stable number of this status (`KARU_*` in the C ABI).
    pub fn code(self) -> u32 {
        self as u32
    }

    /// A short, stable, lower-case name (`"ok"`, `"range_not_satisfiable"`, ...), used by the CLI.
    pub fn name(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::InvalidArgument => "invalid_argument",
            Status::InvalidRange => "invalid_range",
            Status::RangeNotSatisfiable => "range_not_satisfiable",
            Status::NotFound => "not_found",
            Status::PermissionDenied => "permission_denied",
            Status::IsDirectory => "is_directory",
            Status::PreconditionFailed => "precondition_failed",
            Status::Credentials => "credentials",
            Status::Http => "http",
            Status::Network => "network",
            Status::TimedOut => "timed_out",
            Status::Protocol => "protocol",
            Status::Cancelled => "cancelled",
            Status::Unsupported => "unsupported",
            Status::Io => "io",
            Status::Internal => "internal",
        }
    }

    /// Whether this is [`Status::Ok`].
    pub fn is_ok(self) -> bool {
        self == Status::Ok
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How the engine treats an error status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatusClass {
    /// The status the read fails with if nothing changes.
    pub status: Status,
    /// Whether another attempt may succeed.
    pub retryable: bool,
}

/// Classify an HTTP status that is not a successful range answer.
pub fn classify_status(code: u16) -> StatusClass {
    let (status, retryable) = match code {
        // The object (or its container) does not exist: permanent.
        404 | 410 => (Status::NotFound, false),
        // Denied: permanent for this credential (credential corrections are separate).
        401 | 403 => (Status::PermissionDenied, false),
        // The caller's version condition failed: permanent.
        412 => (Status::PreconditionFailed, false),
        416 => (Status::RangeNotSatisfiable, false),
        // Request Timeout, Too Early, Too Many Requests: the server asks us to come back.
        408 | 425 | 429 => (Status::Http, true),
        // Server errors are temporary by nature (RFC 9110 §15.6).
        500..=599 => (Status::Http, true),
        _ => (Status::Http, false),
    };
    StatusClass { status, retryable }
}

/// A failed read or operation: a [`Status`] other than `Ok`, a redacted human-readable
/// message, and what a program can act on, as data:
///
/// - [`Error::status`], and [`Error::http_status`] when a server answered;
/// - [`Error::evidence`]: why a response was refused (the requested range against the one the
///   server stated, a truncated body, another version), or where the object ended;
/// - [`Error::is_transient`]: whether trying again later could succeed;
/// - [`std::error::Error::source`]: the underlying cause (an I/O or transport error), when
///   there is one.
///
/// The message is for people and is not an API. `Error` is one pointer wide.
///
/// ```
/// use karu_engine::{Error, Status};
/// let err = Error::new(Status::NotFound, "no such file: /data/a.bin");
/// assert_eq!(err.status(), Status::NotFound);
/// assert!(!err.is_transient());
/// assert_eq!(err.to_string(), "not_found: no such file: /data/a.bin");
///
/// let cause = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
/// let err = Error::new(Status::Network, "connection failed mid-exchange").with_source(cause);
/// assert!(err.is_transient());
/// let source = std::error::Error::source(&err).unwrap();
/// assert_eq!(
///     source.downcast_ref::<std::io::Error>().map(|e| e.kind()),
///     Some(std::io::ErrorKind::ConnectionReset)
/// );
/// ```
#[derive(Clone)]
pub struct Error(Box<ErrorInner>);

#[derive(Clone)]
struct ErrorInner {
    status: Status,
    message: String,
    http_status: Option<u16>,
    evidence: Option<Evidence>,
    source: Option<Arc<dyn StdError + Send + Sync + 'static>>,
    /// Set where the failure's cause was classified; else derived from the data above.
    transient: Option<bool>,
}

impl Error {
    /// An error of this status with this message. The message must already be free of secrets.
    pub fn new(status: Status, message: impl Into<String>) -> Self {
        debug_assert!(status != Status::Ok, "an error cannot have status Ok");
        Error(Box::new(ErrorInner {
            status,
            message: message.into(),
            http_status: None,
            evidence: None,
            source: None,
            transient: None,
        }))
    }

    /// Attach the HTTP status code the server answered with.
    pub fn with_http_status(mut self, code: u16) -> Self {
        self.0.http_status = Some(code);
        self
    }

    /// Attach the underlying cause, returned by [`source`](std::error::Error::source). Its
    /// text must be free of secrets too.
    pub fn with_source(mut self, source: impl Into<Box<dyn StdError + Send + Sync>>) -> Self {
        self.0.source = Some(Arc::from(source.into()));
        self
    }

    /// Attach the evidence of the failure.
    pub fn with_evidence(mut self, evidence: Evidence) -> Self {
        self.0.evidence = Some(evidence);
        self
    }

    /// State whether trying again later could succeed, where the code that classified the
    /// failure knows better than its status (for example a credential service that was
    /// unreachable: transient, though its status is [`Status::Credentials`]).
    pub fn with_transient(mut self, transient: bool) -> Self {
        self.0.transient = Some(transient);
        self
    }

    /// The status class of this error.
    pub fn status(&self) -> Status {
        self.0.status
    }

    /// The human-readable message (redacted: no credentials, signatures or query strings).
    pub fn message(&self) -> &str {
        &self.0.message
    }

    /// The HTTP status the server answered with, when the error came from a response.
    pub fn http_status(&self) -> Option<u16> {
        self.0.http_status
    }

    /// What the failure proves, when it is more than its status: see [`Evidence`].
    pub fn evidence(&self) -> Option<&Evidence> {
        self.0.evidence.as_ref()
    }

    /// Whether trying the same read again later could succeed: the network failed or timed
    /// out, the server answered with a status that asks to come back (408, 425, 429, 5xx), a
    /// body broke off, or a local read was interrupted. Karu has already retried within the
    /// read's deadline by then; this tells a caller whether its own, later retry makes sense.
    /// A missing object, a refused credential, a changed version, a range past the end or a
    /// response that contradicts itself will fail the same way again.
    pub fn is_transient(&self) -> bool {
        if let Some(transient) = self.0.transient {
            return transient;
        }
        match self.0.status {
            Status::Network | Status::TimedOut => true,
            Status::Http => self
                .0
                .http_status
                .is_some_and(|code| classify_status(code).retryable),
            Status::Protocol => matches!(
                &self.0.evidence,
                Some(Evidence::Response(rejection)) if rejection.retryable()
            ),
            Status::Io => self
                .0
                .source
                .as_deref()
                .and_then(|s| s.downcast_ref::<std::io::Error>())
                .is_some_and(|e| {
                    matches!(
                        e.kind(),
                        std::io::ErrorKind::Interrupted
                            | std::io::ErrorKind::WouldBlock
                            | std::io::ErrorKind::TimedOut
                    )
                }),
            _ => false,
        }
    }

    /// This error with another status and message, keeping everything else (its HTTP status,
    /// evidence, cause and transience).
    pub(crate) fn reworded(mut self, status: Status, message: impl Into<String>) -> Self {
        self.0.status = status;
        self.0.message = message.into();
        self
    }

    /// A shorthand for `Error::new(Status::Internal, ..)`, used where an invariant failed.
    pub(crate) fn internal(message: impl Into<String>) -> Self {
        Error::new(Status::Internal, message)
    }
}

/// Errors are equal when everything a program can ask of them is: status, message, HTTP
/// status, evidence and transience (causes are compared by their text).
impl PartialEq for Error {
    fn eq(&self, other: &Self) -> bool {
        let (a, b) = (&*self.0, &*other.0);
        a.status == b.status
            && a.message == b.message
            && a.http_status == b.http_status
            && a.evidence == b.evidence
            && a.transient == b.transient
            && a.source.as_ref().map(ToString::to_string)
                == b.source.as_ref().map(ToString::to_string)
    }
}

impl Eq for Error {}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Error");
        d.field("status", &self.0.status);
        if let Some(code) = self.0.http_status {
            d.field("http_status", &code);
        }
        d.field("message", &self.0.message);
        if let Some(evidence) = &self.0.evidence {
            d.field("evidence", evidence);
        }
        if let Some(source) = &self.0.source {
            d.field("source", &format_args!("{source}"));
        }
        d.finish()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.0.status, self.0.message)
    }
}

impl StdError for Error {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.0
            .source
            .as_deref()
            .map(|s| s as &(dyn StdError + 'static))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sdk::evidence::Rejection;

    #[test]
    fn codes_are_dense_and_stable() {
        for (i, status) in Status::ALL.iter().enumerate() {
            assert_eq!(status.code() as usize, i, "{status:?}");
        }
        assert_eq!(Status::RangeNotSatisfiable.code(), 3);
        assert_eq!(Status::Internal.code(), 16);
    }

    #[test]
    fn names_are_unique() {
        let mut names: Vec<_> = Status::ALL.iter().map(|s| s.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Status::ALL.len());
    }

    #[test]
    fn error_stays_one_pointer_wide() {
        assert_eq!(std::mem::size_of::<Error>(), std::mem::size_of::<usize>());
    }

    #[test]
    fn transience_follows_the_status_and_the_evidence() {
        let e = |status| Error::new(status, "x");
        assert!(e(Status::Network).is_transient());
        assert!(e(Status::TimedOut).is_transient());
        for code in [408, 425, 429, 500, 503] {
            assert!(
                e(Status::Http).with_http_status(code).is_transient(),
                "{code}"
            );
        }
        for code in [400, 405, 418] {
            assert!(
                !e(Status::Http).with_http_status(code).is_transient(),
                "{code}"
            );
        }
        let truncated = Rejection::Truncated {
            kept: 1,
            wanted: 2,
            seen: 1,
            promised: Some(2),
            interrupted: true,
        };
        assert!(Error::from(truncated).is_transient());
        let overlong = Rejection::Overlong {
            seen: 3,
            promised: 2,
        };
        assert!(!Error::from(overlong).is_transient());
        for status in [
            Status::NotFound,
            Status::PermissionDenied,
            Status::PreconditionFailed,
            Status::RangeNotSatisfiable,
            Status::InvalidRange,
            Status::Credentials,
            Status::Cancelled,
            Status::Internal,
            Status::Io,
        ] {
            assert!(!e(status).is_transient(), "{status:?}");
        }
        let interrupted = std::io::Error::from(std::io::ErrorKind::Interrupted);
        assert!(e(Status::Io).with_source(interrupted).is_transient());
        assert!(e(Status::Credentials).with_transient(true).is_transient());
        assert!(!e(Status::Network).with_transient(false).is_transient());
    }

    #[test]
    fn rewording_keeps_the_data() {
        let cause = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
        let err = Error::new(Status::Http, "the server answered 503")
            .with_http_status(503)
            .with_source(cause)
            .reworded(Status::Credentials, "refused");
        assert_eq!(
            (err.status(), err.message(), err.http_status()),
            (Status::Credentials, "refused", Some(503))
        );
        let source = StdError::source(&err).expect("the cause is kept");
        assert_eq!(
            source.downcast_ref::<std::io::Error>().map(|e| e.kind()),
            Some(std::io::ErrorKind::ConnectionReset)
        );
    }

    #[test]
    fn error_carries_http_status() {
        let err = Error::new(Status::Http, "server answered 500").with_http_status(500);
        assert_eq!(err.http_status(), Some(500));
        assert_eq!(err.status(), Status::Http);
        assert!(err.is_transient(), "a 500 asks to come back");
    }

    #[test]
    fn status_classes() {
        let c = |code| classify_status(code);
        assert_eq!(c(404).status, Status::NotFound);
        assert_eq!(c(403).status, Status::PermissionDenied);
        assert_eq!(c(401).status, Status::PermissionDenied);
        assert_eq!(c(412).status, Status::PreconditionFailed);
        for code in [408, 425, 429, 500, 502, 503, 504, 599] {
            assert!(c(code).retryable, "{code}");
        }
        for code in [400, 401, 403, 404, 405, 409, 410, 412, 416, 418, 451, 301] {
            assert!(!c(code).retryable, "{code}");
        }
    }
}
