//! Karu's figures through the [`metrics`](https://docs.rs/metrics) facade (feature `metrics`,
//! off by default): install any recorder (a Prometheus exporter, a test recorder) and Karu
//! publishes to it.
//!
//! Published by every batch as it runs, from Karu's own threads:
//! - per completion: [`READS`] (counter, labelled `status`), [`READ_BYTES`] (counter),
//!   [`READ_SECONDS`] (histogram: submission to completion) and [`FIRST_BYTE_SECONDS`]
//!   (histogram: submission to the first byte of the transfer that carried the read);
//! - per HTTP transfer: [`TRANSFERS`] (counter), [`TRANSFER_ATTEMPTS`] (histogram) and
//!   [`TRANSFER_BYTES`] (counter: body bytes received over every attempt).
//!
//! Published when asked, by [`Client::publish_metrics`]: the client's counters since it
//! started ([`REQUESTS`], [`BODY_BYTES`], [`RETRIES`], [`HEDGES`], [`HEDGES_WON`],
//! [`CREDENTIAL_LOOKUPS`], [`CREDENTIAL_CALLBACK_CALLS`], [`CREDENTIAL_HITS`],
//! [`CREDENTIAL_FAILURES`]), each labelled `client` with the name given.
//!
//! The same figures are on every [`Completion`](crate::Completion) without this feature:
//! [`Completion::timing`](crate::Completion::timing) and [`Client::transport_stats`].

pub use karu_engine::metric_names::{
    FIRST_BYTE_SECONDS, READ_BYTES, READ_SECONDS, READS, TRANSFER_ATTEMPTS, TRANSFER_BYTES,
    TRANSFERS,
};

use crate::Client;

/// Counter: HTTP requests the client sent (every attempt and redirect hop).
pub const REQUESTS: &str = "karu_client_requests_total";
/// Counter: response body bytes the client received.
pub const BODY_BYTES: &str = "karu_client_body_bytes_total";
/// Counter: attempts made after a failed one.
pub const RETRIES: &str = "karu_client_retries_total";
/// Counter: duplicates sent of requests still waiting for their answers (`[hedge]`).
pub const HEDGES: &str = "karu_client_hedges_total";
/// Counter: duplicates whose answer was the one received.
pub const HEDGES_WON: &str = "karu_client_hedges_won_total";
/// Counter: credential lookups.
pub const CREDENTIAL_LOOKUPS: &str = "karu_client_credential_lookups_total";
/// Counter: credential callback calls.
pub const CREDENTIAL_CALLBACK_CALLS: &str = "karu_client_credential_callback_calls_total";
/// Counter: credential cache hits.
pub const CREDENTIAL_HITS: &str = "karu_client_credential_hits_total";
/// Counter: failed credential lookups.
pub const CREDENTIAL_FAILURES: &str = "karu_client_credential_failures_total";

impl Client {
    /// Publishes this client's counters (since it started) through the `metrics` facade,
    /// labelled `client` = `name`; call it whenever the recorder should see fresh values.
    pub fn publish_metrics(&self, name: &str) {
        let transport = self.transport_stats();
        let credentials = self.credential_stats();
        let label = name.to_string();
        for (key, value) in [
            (REQUESTS, transport.requests),
            (BODY_BYTES, transport.body_bytes),
            (RETRIES, transport.retries),
            (HEDGES, transport.hedges),
            (HEDGES_WON, transport.hedges_won),
            (CREDENTIAL_LOOKUPS, credentials.lookups),
            (CREDENTIAL_CALLBACK_CALLS, credentials.callback_calls),
            (CREDENTIAL_HITS, credentials.hits),
            (CREDENTIAL_FAILURES, credentials.failures),
        ] {
            metrics::counter!(key, "client" => label.clone()).absolute(value);
        }
    }
}
