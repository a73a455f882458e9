//! The remote path's counters: requests, body bytes and retries since the client started.

use std::sync::atomic::AtomicU64;

/// Counters of the remote path, for benchmarks and demos.
#[derive(Debug, Default)]
pub(crate) struct RemoteStats {
    pub(crate) requests: AtomicU64,
    pub(crate) body_bytes: AtomicU64,
    pub(crate) retries: AtomicU64,
}

/// A snapshot of the remote path's counters since the client started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TransportStats {
    /// HTTP requests sent (every attempt and redirect hop).
    pub requests: u64,
    /// Response body bytes received.
    pub body_bytes: u64,
    /// Attempts made after a failed one.
    pub retries: u64,
}
