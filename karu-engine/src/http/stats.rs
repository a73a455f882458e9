//! The remote path's counters: requests, body bytes, retries and hedges since the client
//! started.

use std::sync::atomic::AtomicU64;

/// Counters of the remote path, for benchmarks and demos.
#[derive(Debug, Default)]
pub(crate) struct RemoteStats {
    pub(crate) requests: AtomicU64,
    pub(crate) body_bytes: AtomicU64,
    pub(crate) retries: AtomicU64,
    pub(crate) hedges: AtomicU64,
    pub(crate) hedges_won: AtomicU64,
}

/// A snapshot of the remote path's counters since the client started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TransportStats {
    /// HTTP requests (every attempt and redirect hop), counted when a connection takes one or
    /// when it fails before one did (a refused connection, a failed handshake, a timeout); a
    /// request given up before a connection took it (a duplicate whose original answered
    /// first, a cancelled batch's) never reached the server and is not counted.
    pub requests: u64,
    /// Response body bytes received.
    pub body_bytes: u64,
    /// Attempts made after a failed one.
    pub retries: u64,
    /// Duplicates sent of requests still waiting for their answers (`[hedge]`); each is also
    /// one of `requests`.
    pub hedges: u64,
    /// Duplicates whose answer was the one received (the request they duplicated was
    /// cancelled).
    pub hedges_won: u64,
}
