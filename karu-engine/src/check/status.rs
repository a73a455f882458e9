//! Error statuses: which [`Status`] an HTTP status that is not a range answer becomes, and
//! whether another attempt may succeed.

use crate::sdk::status::Status;

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

#[cfg(test)]
mod tests {
    use super::*;

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
