//! The status of one read, and the error that carries a failed status with its evidence.

use std::fmt;

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

/// A failed read or operation: a [`Status`] other than `Ok` and a redacted, human-readable
/// message. The message is for people; programs ask [`Error::status`] and
/// [`Error::http_status`].
///
/// ```
/// use karu_engine::{Error, Status};
/// let err = Error::new(Status::NotFound, "no such file: /data/a.bin");
/// assert_eq!(err.status(), Status::NotFound);
/// assert_eq!(err.to_string(), "not_found: no such file: /data/a.bin");
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Error(Box<ErrorInner>);

#[derive(Clone, PartialEq, Eq)]
struct ErrorInner {
    status: Status,
    message: String,
    http_status: Option<u16>,
}

impl Error {
    /// An error of this status with this message. The message must already be free of secrets.
    pub fn new(status: Status, message: impl Into<String>) -> Self {
        debug_assert!(status != Status::Ok, "an error cannot have status Ok");
        Error(Box::new(ErrorInner {
            status,
            message: message.into(),
            http_status: None,
        }))
    }

    /// Attach the HTTP status code the server answered with.
    pub fn with_http_status(mut self, code: u16) -> Self {
        self.0.http_status = Some(code);
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

    /// A shorthand for `Error::new(Status::Internal, ..)`, used where an invariant failed.
    pub(crate) fn internal(message: impl Into<String>) -> Self {
        Error::new(Status::Internal, message)
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Error");
        d.field("status", &self.0.status);
        if let Some(code) = self.0.http_status {
            d.field("http_status", &code);
        }
        d.field("message", &self.0.message).finish()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.0.status, self.0.message)
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn error_carries_http_status() {
        let err = Error::new(Status::Http, "server answered 500").with_http_status(500);
        assert_eq!(err.http_status(), Some(500));
        assert_eq!(err.status(), Status::Http);
        assert!(format!("{err:?}").contains("500"));
    }
}
