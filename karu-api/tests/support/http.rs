//! Helpers of the HTTP integration tests: isolated clients with short retry waits, the
//! evidence of the mock server's request log, and (from `karu_testkit::reads`, re-exported)
//! checks of a completion's bytes against the mock's byte pattern.
//!
//! Each `http_*` test binary declares this file with
//! `#[path = "support/http.rs"] mod http_support;` and uses a subset of it.
// Each binary uses a subset, of the re-exports too.
#![allow(dead_code, unused_imports)]

pub(crate) use karu_testkit::reads::{
    KIB, MIB, PATIENCE, assert_failed, assert_ok, assert_pattern, assert_prefix, drain, isolated,
    quick, read_all, read_all_ok, read_one,
};

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use karu::{Client, ClientBuilder, Locator};
use karu_engine::sdk::Backend;
use karu_testkit::{MockServer, RequestRecord};

/// `builder` with a third-party provider: `backend` serving the `scheme`, with the credential
/// `family` if it has one.
pub(crate) fn with_backend(
    builder: ClientBuilder,
    scheme: &'static str,
    family: Option<&'static str>,
    backend: Arc<dyn Backend>,
) -> ClientBuilder {
    builder.provider(move |registry| {
        let mut provider = registry.provider(Arc::clone(&backend));
        provider.scheme(scheme);
        if let Some(family) = family {
            provider.credential_family(family);
        }
    })
}

/// A client built from `builder`.
pub(crate) fn build(builder: ClientBuilder) -> Client {
    builder.build().expect("the test client builds")
}

/// A client with Karu's defaults and short retry waits.
pub(crate) fn client() -> Client {
    build(quick())
}

/// Resolve `path` on `server`.
pub(crate) fn locate(client: &Client, server: &MockServer, path: &str) -> Locator {
    client
        .locate(&server.url(path))
        .expect("a mock server URL resolves")
}

/// The closed ranges of the log, in arrival order (`None` for a request without one).
pub(crate) fn ranges(log: &[RequestRecord]) -> Vec<Option<(u64, u64)>> {
    log.iter().map(|r| r.byte_range).collect()
}

/// The closed ranges of the log sorted by first byte, failing on a request without one.
pub(crate) fn sorted_ranges(log: &[RequestRecord]) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = log
        .iter()
        .map(|r| {
            r.byte_range
                .unwrap_or_else(|| panic!("a request without a closed range: {r:?}"))
        })
        .collect();
    out.sort_unstable();
    out
}

/// The raw `Range` headers of the log, in arrival order.
pub(crate) fn range_headers(log: &[RequestRecord]) -> Vec<String> {
    log.iter()
        .map(|r| r.range.clone().unwrap_or_else(|| "-".to_string()))
        .collect()
}

/// Assert that no byte was requested twice: the logged closed ranges are pairwise disjoint.
#[track_caller]
pub(crate) fn assert_nothing_requested_twice(log: &[RequestRecord]) {
    let ranges = sorted_ranges(log);
    for pair in ranges.windows(2) {
        assert!(
            pair[0].1 < pair[1].0,
            "bytes {}..={} were requested twice: {ranges:?}",
            pair[1].0,
            pair[0].1.min(pair[1].1)
        );
    }
}

/// A one-line summary of each request (range, status, if-match, fault), for messages.
pub(crate) fn describe(log: &[RequestRecord]) -> String {
    let mut out = String::new();
    for r in log {
        let _ = writeln!(out, "{r}");
    }
    out
}

/// Wait until the server has logged `n` requests; returns when it happened (as seen by a
/// 1 ms poll, so at most about a millisecond late).
pub(crate) fn wait_for_requests(server: &MockServer, n: usize) -> Instant {
    let give_up = Instant::now() + PATIENCE;
    loop {
        if server.request_count() >= n {
            return Instant::now();
        }
        assert!(
            Instant::now() < give_up,
            "the server saw {} requests, not {n}, within {PATIENCE:?}:\n{}",
            server.request_count(),
            describe(&server.requests())
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Wait until `condition` holds, failing the test after [`PATIENCE`]. It polls an observable
/// state (the mock's counters); nothing here waits for work to overlap.
#[track_caller]
pub(crate) fn eventually(what: &str, condition: impl Fn() -> bool) {
    let give_up = Instant::now() + PATIENCE;
    while !condition() {
        assert!(Instant::now() < give_up, "{what}: not within {PATIENCE:?}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A port on 127.0.0.1 where nothing listens (bound, then released).
pub(crate) fn refused_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("a local address").port()
}
