//! The transport against the mock server: connection reuse, backpressure under the concurrency
//! limit, HTTPS with a custom CA, HTTP/2, redirects and credentials, refused connections,
//! permanent TLS and HTTP/2 failures, the connect timeout, the drain and error-body bounds, and
//! the single-request operations (`stat`, `read_ends`, `if_match`).

#[path = "support/http.rs"]
mod http_support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_support::{
    KIB, MIB, assert_failed, assert_ok, build, client, describe, drain, locate, quick,
    range_headers, read_all, read_all_ok, read_one, refused_port, wait_for_requests, with_backend,
};
use karu::{Client, Read, Status};
use karu_engine::sdk::{
    Backend, CanonicalPath, Correction, Error, ErrorResponse, Locator, PrepareContext,
    PreparedRequest, Resolved, Snapshot,
};
use karu_testkit::{
    Fault, FaultRule, Gate, GateResponse, MockServer, RequestHead, pattern, pattern_byte,
};

#[test]
fn sequential_small_reads_reuse_a_few_connections() {
    let server = MockServer::start();
    server.insert_virtual("/o", 64 * MIB);
    let client = client();
    let object = locate(&client, &server, "/o");
    for i in 0..50u64 {
        assert_ok(&read_one(&client, &object, i * MIB, 100), i * MIB, 100);
    }
    let log = server.requests();
    assert_eq!(log.len(), 50);
    let connections: BTreeSet<u64> = log.iter().map(|r| r.connection).collect();
    // At most one connection per event loop (4 by default), each reused.
    assert!(
        server.connections_accepted() <= 4 && connections.len() <= 4,
        "{} connections for 50 sequential reads:\n{}",
        server.connections_accepted(),
        describe(&log)
    );

    // One loop: one connection carries everything.
    let server = MockServer::start();
    server.insert_virtual("/o", 64 * MIB);
    let client = build(quick().io_threads(1));
    let object = locate(&client, &server, "/o");
    for i in 0..20u64 {
        assert_ok(&read_one(&client, &object, i * MIB, 100), i * MIB, 100);
    }
    assert_eq!(server.connections_accepted(), 1);
    assert!(server.requests().iter().all(|r| r.connection == 1));
}

/// Answers ranges of a pattern object, each with `Connection: close`: the server closes
/// every connection after one answer.
#[derive(Debug)]
struct CloseAfterEachAnswer;

impl karu_testkit::Route for CloseAfterEachAnswer {
    fn respond(&self, request: &RequestHead) -> Option<GateResponse> {
        let range = request.header("range")?.strip_prefix("bytes=")?;
        let (first, last) = range.split_once('-')?;
        let (first, last): (u64, u64) = (first.parse().ok()?, last.parse().ok()?);
        let body: Vec<u8> = (first..=last).map(pattern_byte).collect();
        Some(
            GateResponse::new(206, body)
                .header(
                    "content-range",
                    format!("bytes {first}-{last}/{}", 64 * MIB),
                )
                .header("connection", "close"),
        )
    }
}

#[test]
fn a_connection_the_server_closed_after_its_answer_never_carries_another_request() {
    let server = MockServer::start();
    server.insert_virtual("/o", 64 * MIB);
    server.set_route(Some(Arc::new(CloseAfterEachAnswer)));
    // One loop, so every read after the first would find the last connection in its pool.
    let client = build(quick().io_threads(1));
    let object = locate(&client, &server, "/o");
    for i in 0..10u64 {
        assert_ok(&read_one(&client, &object, i * MIB, 100), i * MIB, 100);
    }
    let log = server.requests();
    // Each read asked once, on a connection of its own, naming the server's host and port.
    assert_eq!(log.len(), 10, "{}", describe(&log));
    let connections: BTreeSet<u64> = log.iter().map(|r| r.connection).collect();
    assert_eq!(connections.len(), 10, "{}", describe(&log));
    assert_eq!(server.connections_accepted(), 10);
    let authority = server.addr().to_string();
    assert!(
        log.iter()
            .all(|r| r.header("host") == Some(authority.as_str())),
        "{}",
        describe(&log)
    );
    let stats = client.transport_stats();
    assert_eq!((stats.requests, stats.retries), (10, 0));
}

#[test]
fn a_server_that_ends_connections_after_three_requests_costs_no_read() {
    // As nginx's `keepalive_requests` does: over HTTP/1.1 the third answer says
    // `Connection: close`; over HTTP/2 the server sends GOAWAY with it.
    for http2 in [false, true] {
        let server = MockServer::builder().http2(http2).start().unwrap();
        server.insert_virtual("/o", 64 * MIB);
        server.set_requests_per_connection(Some(3));
        let mut builder = quick().io_threads(1);
        if http2 {
            builder = builder.set("http.version", "http2");
        }
        let client = build(builder);
        let object = locate(&client, &server, "/o");
        for i in 0..9u64 {
            assert_ok(
                &read_one(&client, &object, i * MIB + 5, 100),
                i * MIB + 5,
                100,
            );
        }
        // Each read asked once, and on a new connection once the server has said it ends one.
        let log = server.requests();
        assert_eq!(log.len(), 9, "http2 {http2}: {}", describe(&log));
        let ranges: BTreeSet<&str> = log.iter().filter_map(|r| r.header("range")).collect();
        assert_eq!(ranges.len(), 9, "http2 {http2}: {}", describe(&log));
        let mut per_connection: BTreeMap<u64, usize> = BTreeMap::new();
        for r in &log {
            *per_connection.entry(r.connection).or_default() += 1;
        }
        let counts: Vec<usize> = per_connection.values().copied().collect();
        if http2 {
            // HTTP/2's graceful shutdown (RFC 9113, 6.8) first sends GOAWAY with the largest
            // stream id, then the last one it accepted after a PING's round trip: a request
            // the client sent before it read the first GOAWAY is still served. These reads
            // are sequential, so that is at most one request past the third, and the next one
            // comes after the GOAWAY, on a new connection.
            let (last, ended) = counts.split_last().unwrap();
            assert!(
                ended.iter().all(|&n| n == 3 || n == 4) && (1..=3).contains(last),
                "{counts:?}: {}",
                describe(&log)
            );
        } else {
            assert_eq!(counts, [3, 3, 3], "{}", describe(&log));
        }
        assert_eq!(
            server.connections_accepted(),
            counts.len() as u64,
            "http2 {http2}"
        );
    }
}

#[test]
fn http1_never_opens_more_connections_than_the_concurrency_limit() {
    // Two loops sharing a limit of 2. Each loop may carry only its share: a read_ends whose
    // two requests ran on one loop left that loop with two connections, and the other loop
    // then opened a third.
    let server = MockServer::start();
    for path in ["/a", "/b", "/x"] {
        server.insert_virtual(path, MIB);
    }
    // The stat of /x is held until the head request of /b arrives: both loops busy at once.
    server.add_fault(FaultRule::new(Fault::Barrier(2)).path("/x"));
    server.add_fault(FaultRule::new(Fault::Barrier(2)).path("/b").times(1));
    let client = build(quick().concurrency(2).io_threads(2));
    let (a, b, x) = (
        locate(&client, &server, "/a"),
        locate(&client, &server, "/b"),
        locate(&client, &server, "/x"),
    );
    let ends = client.read_ends(&a, 64 * KIB, 64 * KIB).unwrap();
    assert_eq!(ends.size, MIB);
    let before = server.request_count();
    std::thread::scope(|scope| {
        let stat = scope.spawn(|| client.stat(&x));
        wait_for_requests(&server, before + 1);
        let ends = client.read_ends(&b, 64 * KIB, 64 * KIB).unwrap();
        assert_eq!(ends.size, MIB);
        assert_eq!(stat.join().unwrap().unwrap().size, Some(MIB));
    });
    let log = server.requests();
    assert_eq!(log.len(), 5, "{}", describe(&log));
    assert!(
        server.connections_accepted() <= 2,
        "{} connections for a limit of 2:\n{}",
        server.connections_accepted(),
        describe(&log)
    );

    // Many read_ends at once, from more threads than the limit: the server never sees more
    // connections than the limit, each reused.
    let server = MockServer::start();
    for i in 0..64 {
        server.insert_virtual(&format!("/o{i}"), MIB);
    }
    let client = build(
        karu_testkit::reads::without_hedging(quick())
            .concurrency(8)
            .io_threads(4),
    );
    let objects: Vec<_> = (0..64)
        .map(|i| locate(&client, &server, &format!("/o{i}")))
        .collect();
    std::thread::scope(|scope| {
        for chunk in objects.chunks(4) {
            let client = &client;
            scope.spawn(move || {
                for object in chunk {
                    assert_eq!(
                        client.read_ends(object, 4 * KIB, 4 * KIB).unwrap().size,
                        MIB
                    );
                }
            });
        }
    });
    // Two requests per object.
    karu_testkit::reads::assert_requests(&server.requests(), 128);
    assert!(server.max_in_flight() <= 8);
    assert!(
        server.connections_accepted() <= 8,
        "{} connections for a limit of 8",
        server.connections_accepted()
    );
}

#[test]
fn a_huge_batch_never_has_more_requests_in_flight_than_the_concurrency_limit() {
    const READS: u64 = 20_000;
    const STRIDE: u64 = 2 * MIB;
    let server = MockServer::builder()
        .latency(Duration::from_millis(1))
        .start()
        .unwrap();
    server.insert_virtual("/huge", READS * STRIDE);
    let client = build(karu_testkit::reads::without_hedging(quick()).concurrency(8));
    let object = locate(&client, &server, "/huge");
    let batch = client.submit((0..READS).map(|i| Read::new(&object, i * STRIDE, 1)));
    assert_eq!(
        batch.stats().transfers,
        READS as usize,
        "reads 2 MiB apart never merge"
    );
    let done = drain(&batch);
    assert_eq!(done.len(), READS as usize);
    for (i, c) in done.iter().enumerate() {
        assert_eq!(c.status(), Status::Ok, "{c:?}");
        assert_eq!(c.bytes(), [pattern_byte(i as u64 * STRIDE)], "read {i}");
    }
    karu_testkit::reads::assert_requests(&server.requests(), READS as usize);
    let peak = server.max_in_flight();
    assert!(
        (2..=8).contains(&peak),
        "the server saw {peak} requests in flight at once (limit 8)"
    );
}

/// Reads 2 MiB apart (one request each) of a batch bounded to `limit` transfers in flight,
/// on a client whose concurrency is 16: the server holds every answer until `limit` requests
/// have arrived (rounds of `limit`), and each request takes a 20 ms link latency, so a batch
/// whose transfers all started at once would have 16 in flight.
fn bounded_batch_case(limit: usize, reads: u64, local: Option<&std::path::Path>) {
    const STRIDE: u64 = 2 * MIB;
    let server = MockServer::builder()
        .latency(Duration::from_millis(20))
        .start()
        .unwrap();
    server.insert_virtual("/o", reads * STRIDE);
    server.add_fault(FaultRule::new(Fault::Barrier(limit as u64)).path("/o"));
    let client = build(quick().concurrency(16).io_threads(4));
    let object = locate(&client, &server, "/o");
    let mut batch_reads: Vec<Read<'static>> = (0..reads)
        .map(|i| Read::new(&object, i * STRIDE + i, 100 + i))
        .collect();
    // Local reads of the same batch share its bound (and never reach the server).
    let file = local.map(|path| client.locate(path.to_str().unwrap()).unwrap());
    if let Some(file) = &file {
        batch_reads.extend((0..4).map(|i| Read::new(file, i * 10, 10)));
    }
    let batch = client.submit_with(
        batch_reads,
        &karu::BatchOptions::new().max_gap(0).max_in_flight(limit),
    );
    let done = drain(&batch);
    for c in &done[..reads as usize] {
        let i = c.index() as u64;
        assert_eq!(c.status(), Status::Ok, "{c:?}");
        assert_eq!(
            c.bytes(),
            pattern(i * STRIDE + i, 100 + i as usize),
            "read {i}"
        );
    }
    for c in &done[reads as usize..] {
        let i = (c.index() - reads as usize) as u64;
        assert_eq!(c.status(), Status::Ok, "{c:?}");
        assert_eq!(c.bytes(), pattern(i * 10, 10), "local read {i}");
    }
    let log = server.requests();
    karu_testkit::reads::assert_requests(&log, reads as usize);
    let mut ranges: Vec<_> = log.iter().map(|r| r.byte_range.unwrap()).collect();
    ranges.sort_unstable();
    let want: Vec<_> = (0..reads)
        .map(|i| (i * STRIDE + i, i * STRIDE + i + 100 + i - 1))
        .collect();
    assert_eq!(ranges, want, "{}", describe(&log));
    // The barrier holds each round until `limit` requests are in flight: never fewer at the
    // peak, and the bound allows no more.
    assert_eq!(
        server.max_in_flight(),
        limit as u64,
        "a batch bounded to {limit} transfers in flight"
    );
}

#[test]
fn a_batch_bounded_in_flight_never_has_more_requests_at_the_server() {
    bounded_batch_case(3, 24, None);
    bounded_batch_case(1, 5, None);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("local");
    std::fs::write(&path, pattern(0, 40)).unwrap();
    bounded_batch_case(2, 8, Some(&path));
}

#[test]
fn dropping_a_bounded_batch_cancels_the_transfers_still_waiting() {
    let server = MockServer::start();
    server.insert_virtual("/o", 64 * MIB);
    // The first request is never answered: the batch's one place stays taken.
    server.add_fault(FaultRule::new(Fault::NeverAnswer).path("/o").times(1));
    let client = client();
    let object = locate(&client, &server, "/o");
    let batch = client.submit_with(
        (0..6).map(|i| Read::new(&object, i * 2 * MIB, 10)),
        &karu::BatchOptions::new().max_gap(0).max_in_flight(1),
    );
    wait_for_requests(&server, 1);
    batch.cancel();
    let done = drain(&batch);
    assert_eq!(done.len(), 6);
    for c in &done {
        assert_eq!(c.status(), Status::Cancelled, "{c:?}");
    }
    // Only the first was ever sent: the others waited in the batch and were cancelled there.
    karu_testkit::reads::assert_requests(&server.requests(), 1);
}

#[test]
fn https_with_the_mocks_ca_delivers_exact_bytes() {
    let server = MockServer::builder().tls(true).start().unwrap();
    server.insert_virtual("/o", 8 * MIB);
    let ca = server.ca_file().unwrap();
    let client = build(quick().set("http.ca_file", ca.to_str().unwrap()));
    let object = locate(&client, &server, "/o");
    assert!(server.url("/o").starts_with("https://"));
    let done = read_all(
        &client,
        &object,
        &[(0, 100), (3 * MIB, 64 * KIB), (8 * MIB - 1, 1)],
    );
    assert_ok(&done[0], 0, 100);
    assert_ok(&done[1], 3 * MIB, 64 * KIB);
    assert_ok(&done[2], 8 * MIB - 1, 1);
    assert_eq!(
        server.request_count(),
        3,
        "{}",
        describe(&server.requests())
    );
}

#[test]
fn an_untrusted_certificate_is_a_network_error_without_retries() {
    let server = MockServer::builder().tls(true).start().unwrap();
    server.insert_virtual("/o", MIB);
    let client = client(); // platform roots only: the mock's CA is unknown
    let object = locate(&client, &server, "/o");
    let c = read_one(&client, &object, 0, 100);
    assert_failed(&c, Status::Network);
    // The message names the cause and the remedy.
    let message = c.error().unwrap().message();
    assert!(message.contains("certificate"), "{message}");
    assert!(message.contains("http.ca_file"), "{message}");
    // Another attempt meets the same certificate; the TLS error is kept as the cause.
    assert!(!c.error().unwrap().is_transient(), "{c:?}");
    assert!(std::error::Error::source(c.error().unwrap()).is_some());
    // The handshake failed, so no request reached the server; one connection was tried.
    assert_eq!(server.request_count(), 0);
    assert_eq!(
        server.connections_accepted(),
        1,
        "a permanent failure is not retried"
    );
    let stats = client.transport_stats();
    assert_eq!((stats.requests, stats.retries), (1, 0));
}

/// Reads 2 MiB apart from `server` (TLS or not) with HTTP/2, one event loop, the server
/// holding each answer for 100 ms: exact bytes, and the requests multiplexed on one
/// connection, several in flight at once.
fn http2_case(server: &MockServer) {
    server.insert_virtual("/o", 64 * MIB);
    server.set_latency(Duration::from_millis(100));
    let mut builder = quick().io_threads(1).set("http.version", "http2");
    if let Some(ca) = server.ca_file() {
        builder = builder.set("http.ca_file", ca.to_str().unwrap());
    }
    let client = build(builder);
    let object = locate(&client, server, "/o");
    let reads: Vec<(u64, u64)> = (0..6).map(|i| (i * 2 * MIB + 7, 1000)).collect();
    read_all_ok(&client, &object, &reads);
    let log = server.requests();
    assert_eq!(log.len(), 6, "{}", describe(&log));
    assert_eq!(server.connections_accepted(), 1, "{}", describe(&log));
    assert!(
        server.max_in_flight() >= 2,
        "HTTP/1.1 cannot have two requests in flight on one connection"
    );
}

/// A TLS server holding each answer for `latency`, offering h2 or not, with a 64 MiB object
/// at `/o`; a client of one event loop speaking `version` that trusts it; the object.
fn tls_case(server_h2: bool, latency: Duration, version: &str) -> (MockServer, Client, Locator) {
    let server = MockServer::builder()
        .tls(true)
        .http2(server_h2)
        .latency(latency)
        .start()
        .unwrap();
    server.insert_virtual("/o", 64 * MIB);
    let ca = server.ca_file().unwrap();
    let client = build(
        quick()
            .io_threads(1)
            .set("http.version", version)
            .set("http.ca_file", ca.to_str().unwrap()),
    );
    let object = locate(&client, &server, "/o");
    (server, client, object)
}

/// One read, then six concurrent reads 2 MiB apart, over TLS with one event loop and
/// `version`, against a server that offers h2 or not; returns the connections the server
/// accepted and the most requests it had in flight.
fn version_case(version: &str, server_h2: bool) -> (u64, u64) {
    let (server, client, object) = tls_case(server_h2, Duration::from_millis(200), version);
    // The first connection learns the protocol (ALPN); the batch then finds it in the pool.
    assert_ok(&read_one(&client, &object, 99, 1), 99, 1);
    let reads: Vec<(u64, u64)> = (0..6).map(|i| (i * 2 * MIB, 100)).collect();
    read_all_ok(&client, &object, &reads);
    assert_eq!(server.request_count(), 7);
    (server.connections_accepted(), server.max_in_flight())
}

#[test]
fn the_http_version_policy_decides_multiplexing() {
    // HTTP/1.1 (the default): one request per connection at a time.
    assert_eq!(version_case("http1", true), (6, 6));
    // Automatic: h2 where the server offers it (one connection carries all six at once),
    // HTTP/1.1 where it does not.
    assert_eq!(version_case("auto", true), (1, 6));
    assert_eq!(version_case("auto", false), (6, 6));
}

#[test]
fn a_cold_burst_under_auto_waits_for_one_handshake_and_shares_its_http2_connection() {
    let (server, client, object) = tls_case(true, Duration::from_millis(100), "auto");
    let reads: Vec<(u64, u64)> = (0..6).map(|i| (i * 2 * MIB + 3, 100)).collect();
    // Cold: the protocol is unknown until the first handshake ends; the other reads wait for
    // it instead of opening a connection each, and it turns out to be HTTP/2.
    read_all_ok(&client, &object, &reads);
    assert_eq!(server.connections_accepted(), 1);
    // From then on the same connection carries every request, several at once.
    server.reset_max_in_flight();
    for _ in 0..3 {
        read_all_ok(&client, &object, &reads);
    }
    let log = server.requests();
    assert_eq!(log.len(), 24, "{}", describe(&log));
    assert_eq!(server.connections_accepted(), 1, "{}", describe(&log));
    let connections: BTreeSet<u64> = log.iter().map(|r| r.connection).collect();
    assert_eq!(connections.len(), 1, "{}", describe(&log));
    assert!(server.max_in_flight() >= 2, "{}", describe(&log));
}

#[test]
fn a_cold_burst_under_auto_against_an_http1_server_opens_its_connections_after_the_first() {
    let server = MockServer::builder().tls(true).start().unwrap();
    server.insert_virtual("/o", 64 * MIB);
    // The server answers none of the six until all six have arrived: only six connections
    // at once can carry them.
    server.add_fault(FaultRule::new(Fault::Barrier(6)).path("/o"));
    let ca = server.ca_file().unwrap();
    let client = build(
        quick()
            .io_threads(1)
            .set("http.version", "auto")
            .set("http.ca_file", ca.to_str().unwrap())
            .set("retry.deadline", "5s"),
    );
    let object = locate(&client, &server, "/o");
    let reads: Vec<(u64, u64)> = (0..6).map(|i| (i * 2 * MIB + 3, 100)).collect();
    // The first handshake says HTTP/1.1: the reads that waited for it open their own (left
    // waiting for the first connection, they would queue behind its held request until
    // their deadline). Each read is asked once.
    read_all_ok(&client, &object, &reads);
    let log = server.requests();
    assert_eq!(log.len(), 6, "{}", describe(&log));
    assert_eq!(server.connections_accepted(), 6, "{}", describe(&log));
    assert_eq!(client.transport_stats().retries, 0);
}

#[test]
fn http2_over_tls_with_alpn() {
    http2_case(&MockServer::builder().tls(true).http2(true).start().unwrap());
}

#[test]
fn http2_over_plain_tcp_with_prior_knowledge() {
    http2_case(&MockServer::builder().http2(true).start().unwrap());
}

/// Answers `from` with a 302 to `to`.
#[derive(Debug)]
struct Redirect {
    from: String,
    to: String,
}

impl Gate for Redirect {
    fn check(&self, request: &RequestHead) -> Option<GateResponse> {
        (request.path == self.from).then(|| GateResponse::new(302, "").header("location", &self.to))
    }
}

#[test]
fn redirects_are_followed_and_credentials_never_leave_their_origin() {
    let first = MockServer::start();
    let second = MockServer::start();
    second.insert_virtual("/elsewhere", 4 * MIB);
    first.insert_virtual("/here", 4 * MIB);
    first.set_gate(Some(Arc::new(Redirect {
        from: "/away".into(),
        to: second.url("/elsewhere"),
    })));
    second.set_gate(Some(Arc::new(Redirect {
        from: "/back".into(),
        to: first.url("/here"),
    })));
    let headers: BTreeMap<&str, &str> = [("X-Api-Key", "key")].into();
    let client = build(
        quick()
            .path_set(&first.base_url(), "http_provider.bearer_token", "tok")
            .path_set(&first.base_url(), "http_provider.headers", headers),
    );

    // Another origin: followed, without the token or the configured header.
    let object = locate(&client, &first, "/away");
    assert_ok(&read_one(&client, &object, 1000, 100), 1000, 100);
    // The same origin: followed with them.
    first.set_gate(Some(Arc::new(Redirect {
        from: "/moved".into(),
        to: "/here".into(),
    })));
    let object = locate(&client, &first, "/moved");
    assert_ok(&read_one(&client, &object, 2000, 100), 2000, 100);

    let a = first.requests();
    let b = second.requests();
    assert_eq!(
        a.iter()
            .map(|r| (r.path.as_str(), r.status))
            .collect::<Vec<_>>(),
        [("/away", 302), ("/moved", 302), ("/here", 206)],
        "{}",
        describe(&a)
    );
    for r in &a {
        assert_eq!(r.header("authorization"), Some("Bearer tok"), "{r:?}");
        assert_eq!(r.header("x-api-key"), Some("key"), "{r:?}");
    }
    assert_eq!(b.len(), 1, "{}", describe(&b));
    assert_eq!(b[0].path, "/elsewhere");
    assert_eq!(b[0].range.as_deref(), Some("bytes=1000-1099"));
    assert_eq!(
        b[0].header("authorization"),
        None,
        "the token crossed origins"
    );
    assert_eq!(
        b[0].header("x-api-key"),
        None,
        "a configured header crossed origins"
    );
    assert_eq!(
        range_headers(&a[1..]),
        ["bytes=2000-2099", "bytes=2000-2099"]
    );
    // Karu's own agent on every hop (the engine shares the workspace's version).
    for r in a.iter().chain(&b) {
        assert_eq!(r.header("user-agent"), Some(KARU_AGENT), "{r:?}");
    }

    // Away and back: what stayed behind at another origin does not return with a redirect
    // to the first (each hop's headers are prepared again, then stripped).
    first.set_gate(Some(Arc::new(Redirect {
        from: "/bounce".into(),
        to: second.url("/back"),
    })));
    let object = locate(&client, &first, "/bounce");
    assert_ok(&read_one(&client, &object, 3000, 100), 3000, 100);
    let a = first.requests();
    let b = second.requests();
    let hops: Vec<_> = a[3..]
        .iter()
        .chain(&b[1..])
        .map(|r| {
            (
                r.path.as_str(),
                r.status,
                r.range.as_deref(),
                r.header("authorization"),
                r.header("x-api-key"),
                r.header("user-agent"),
            )
        })
        .collect();
    let range = Some("bytes=3000-3099");
    let agent = Some(KARU_AGENT);
    assert_eq!(
        hops,
        [
            (
                "/bounce",
                302,
                range,
                Some("Bearer tok"),
                Some("key"),
                agent
            ),
            ("/here", 206, range, None, None, agent),
            ("/back", 302, range, None, None, agent),
        ],
        "{}\n{}",
        describe(&a),
        describe(&b)
    );
}

/// The `User-Agent` Karu sends when none is configured.
const KARU_AGENT: &str = concat!("karu/", env!("CARGO_PKG_VERSION"));

#[test]
fn a_configured_user_agent_replaces_karus_and_karus_returns_across_origins() {
    let first = MockServer::start();
    let second = MockServer::start();
    second.insert_virtual("/elsewhere", MIB);
    first.insert_virtual("/here", MIB);
    first.set_gate(Some(Arc::new(Redirect {
        from: "/away".into(),
        to: second.url("/elsewhere"),
    })));
    let headers: BTreeMap<&str, &str> = [("User-Agent", "mine/2")].into();
    let client = build(quick().path_set(&first.base_url(), "http_provider.headers", headers));

    for path in ["/here", "/away"] {
        let object = locate(&client, &first, path);
        assert_ok(&read_one(&client, &object, 10, 100), 10, 100);
    }

    let a = first.requests();
    let b = second.requests();
    assert_eq!(
        a.iter()
            .map(|r| (r.path.as_str(), r.status, r.header("user-agent")))
            .collect::<Vec<_>>(),
        [
            ("/here", 206, Some("mine/2")),
            ("/away", 302, Some("mine/2"))
        ],
        "{}",
        describe(&a)
    );
    // A configured header never crosses origins: the other origin sees Karu's own agent.
    assert_eq!(
        b.iter()
            .map(|r| (r.path.as_str(), r.status, r.header("user-agent")))
            .collect::<Vec<_>>(),
        [("/elsewhere", 206, Some(KARU_AGENT))],
        "{}",
        describe(&b)
    );
    assert_eq!(range_headers(&b), ["bytes=10-109"]);
}

#[test]
fn a_refused_connection_is_a_network_error_after_three_attempts() {
    let port = refused_port();
    let client = client();
    let object = client
        .locate(&format!("http://127.0.0.1:{port}/o"))
        .unwrap();
    let c = read_one(&client, &object, 0, 10);
    assert_failed(&c, Status::Network);
    let error = c.error().unwrap();
    assert!(error.is_transient(), "{error:?}");
    // The cause is kept: the refusal itself, somewhere down the chain of sources.
    let mut cause = std::error::Error::source(error);
    let mut refused = false;
    while let Some(e) = cause {
        refused |= e
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused);
        cause = e.source();
    }
    assert!(refused, "no ConnectionRefused in the sources of {error:?}");
    let stats = client.transport_stats();
    assert_eq!((stats.requests, stats.retries), (3, 2), "{error:?}");
}

#[test]
fn stat_is_one_request_for_byte_zero() {
    let server = MockServer::start();
    server.insert_virtual("/o", 5 * MIB + 3);
    server.set_etag("/o", Some("\"strong\""));
    server.insert_virtual("/weak", 10);
    server.set_etag("/weak", Some("W/\"weak\""));
    server.insert_virtual("/none", 11);
    server.set_etag("/none", None);
    server.insert("/empty", Vec::new());
    let client = client();

    let info = client.stat(&locate(&client, &server, "/o")).unwrap();
    assert_eq!(
        (info.size, info.etag.as_deref()),
        (Some(5 * MIB + 3), Some("\"strong\""))
    );
    let info = client.stat(&locate(&client, &server, "/weak")).unwrap();
    assert_eq!(
        (info.size, info.etag),
        (Some(10), None),
        "a weak ETag is not returned"
    );
    let info = client.stat(&locate(&client, &server, "/none")).unwrap();
    assert_eq!((info.size, info.etag), (Some(11), None));
    let info = client.stat(&locate(&client, &server, "/empty")).unwrap();
    assert_eq!(info.size, Some(0));
    let e = client
        .stat(&locate(&client, &server, "/missing"))
        .unwrap_err();
    assert_eq!(e.status(), Status::NotFound);
    // A window, bounded or not, probes the object like any stat: what it shows is the window
    // clipped to what exists, with the object's ETag.
    let object = locate(&client, &server, "/o");
    let info = client
        .stat(&object.with_window(MIB, None).unwrap())
        .unwrap();
    assert_eq!(info.size, Some(4 * MIB + 3));
    let info = client
        .stat(&object.with_window(MIB, Some(10)).unwrap())
        .unwrap();
    assert_eq!(
        (info.size, info.etag.as_deref()),
        (Some(10), Some("\"strong\""))
    );
    let info = client
        .stat(&object.with_window(5 * MIB, Some(100)).unwrap())
        .unwrap();
    assert_eq!(info.size, Some(3), "the window reaches past the end");
    let info = client
        .stat(&object.with_window(6 * MIB, Some(4)).unwrap())
        .unwrap();
    assert_eq!(info.size, Some(0), "the window starts past the end");
    let missing = locate(&client, &server, "/missing");
    let e = client
        .stat(&missing.with_window(0, Some(4)).unwrap())
        .unwrap_err();
    assert_eq!(e.status(), Status::NotFound);
    let info = futures::executor::block_on(
        client.stat_async(&object.with_window(5 * MIB, Some(100)).unwrap()),
    )
    .unwrap();
    assert_eq!(info.size, Some(3));

    let log = server.requests();
    assert_eq!(
        log.iter()
            .map(|r| (r.path.as_str(), r.range.as_deref(), r.status))
            .collect::<Vec<_>>(),
        [
            ("/o", Some("bytes=0-0"), 206),
            ("/weak", Some("bytes=0-0"), 206),
            ("/none", Some("bytes=0-0"), 206),
            ("/empty", Some("bytes=0-0"), 416),
            ("/missing", Some("bytes=0-0"), 404),
            ("/o", Some("bytes=0-0"), 206),
            ("/o", Some("bytes=0-0"), 206),
            ("/o", Some("bytes=0-0"), 206),
            ("/o", Some("bytes=0-0"), 206),
            ("/missing", Some("bytes=0-0"), 404),
            ("/o", Some("bytes=0-0"), 206),
        ],
        "{}",
        describe(&log)
    );
}

#[test]
fn read_ends_is_one_round_trip_of_a_head_and_a_suffix() {
    let server = MockServer::start();
    server.insert_virtual("/o", 10 * MIB);
    server.set_etag("/o", Some("\"v1\""));
    let client = client();
    let object = locate(&client, &server, "/o");
    let ends = client.read_ends(&object, 4096, 65_536).unwrap();
    assert_eq!(ends.size, 10 * MIB);
    assert_eq!(ends.etag.as_deref(), Some("\"v1\""));
    assert_eq!(ends.head, pattern(0, 4096));
    assert_eq!(ends.tail, pattern(10 * MIB - 65_536, 65_536));
    let mut ranges = range_headers(&server.requests());
    ranges.sort();
    assert_eq!(ranges, ["bytes=-65536", "bytes=0-4095"]);
}

/// `read_ends(head, tail)` of the server's empty `/empty`: nothing, size 0; the requests it took.
fn ends_of_empty(
    client: &Client,
    server: &MockServer,
    head: u64,
    tail: u64,
) -> Vec<karu_testkit::RequestRecord> {
    let ends = client
        .read_ends(&locate(client, server, "/empty"), head, tail)
        .unwrap();
    assert_eq!(ends.size, 0);
    assert!(ends.head.is_empty() && ends.tail.is_empty());
    server.take_requests()
}

#[test]
fn read_ends_of_objects_smaller_than_head_and_tail_and_of_an_empty_object() {
    let server = MockServer::start();
    server.insert("/small", pattern(0, 100));
    server.insert("/empty", Vec::new());
    let client = client();
    let ends = client
        .read_ends(&locate(&client, &server, "/small"), 80, 80)
        .unwrap();
    assert_eq!(ends.size, 100);
    assert_eq!(ends.head, pattern(0, 80));
    assert_eq!(ends.tail, pattern(20, 80));
    let mut ranges = range_headers(&server.take_requests());
    ranges.sort();
    assert_eq!(ranges, ["bytes=-80", "bytes=0-79"]);

    let log = ends_of_empty(&client, &server, 10, 10);
    assert_eq!(log.len(), 2, "{}", describe(&log));
    assert!(log.iter().all(|r| r.status == 416), "{}", describe(&log));
}

#[test]
fn a_tail_alone_is_one_suffix_request_whose_answer_states_the_size() {
    let server = MockServer::start();
    server.insert_virtual("/o", 10 * MIB);
    server.set_etag("/o", Some("\"v1\""));
    server.insert("/small", pattern(0, 100));
    server.insert("/empty", Vec::new());
    let client = client();
    let object = locate(&client, &server, "/o");
    let ends = client.read_ends(&object, 0, 65_536).unwrap();
    assert_eq!(
        (ends.size, ends.etag.as_deref()),
        (10 * MIB, Some("\"v1\""))
    );
    assert!(ends.head.is_empty());
    assert_eq!(ends.tail, pattern(10 * MIB - 65_536, 65_536));
    assert!(ends.last_modified.is_some());
    assert_eq!(range_headers(&server.take_requests()), ["bytes=-65536"]);

    // Longer than the object: all of it; an empty object: its 416 states the size.
    let small = locate(&client, &server, "/small");
    let ends = client.read_ends(&small, 0, 500).unwrap();
    assert_eq!((ends.size, ends.tail), (100, pattern(0, 100)));
    assert_eq!(range_headers(&server.take_requests()), ["bytes=-500"]);
    let log = ends_of_empty(&client, &server, 0, 10);
    assert_eq!(
        (log.len(), log[0].range.as_deref(), log[0].status),
        (1, Some("bytes=-10"), 416),
        "{}",
        describe(&log)
    );

    // An unbounded window: only what follows its start, however long the suffix.
    let start = 9 * MIB + 1;
    let open = object.with_window(start, None).unwrap();
    let ends = client.read_ends(&open, 0, 2 * MIB).unwrap();
    assert_eq!(ends.size, 10 * MIB - start);
    assert_eq!(ends.tail, pattern(start, (10 * MIB - start) as usize));
    assert_eq!(range_headers(&server.take_requests()), ["bytes=-2097152"]);

    // A server that ignores the range sends the whole object: the tail is its end.
    server.add_fault(FaultRule::new(Fault::IgnoreRange).times(1));
    let ends = client.read_ends(&small, 0, 30).unwrap();
    assert_eq!((ends.size, ends.tail), (100, pattern(70, 30)));
    let log = server.take_requests();
    assert_eq!((log.len(), log[0].status), (1, 200), "{}", describe(&log));
}

#[test]
fn read_ends_of_a_window_uses_closed_ranges_inside_it() {
    let server = MockServer::start();
    server.insert_virtual("/o", 10 * MIB);
    let client = client();
    let object = locate(&client, &server, "/o");
    let start = 3 * MIB + 1;
    let window = object.with_window(start, Some(MIB)).unwrap();
    let ends = client.read_ends(&window, 100, 200).unwrap();
    assert_eq!(ends.size, MIB);
    assert_eq!(ends.head, pattern(start, 100));
    assert_eq!(ends.tail, pattern(start + MIB - 200, 200));
    let mut ranges = range_headers(&server.take_requests());
    ranges.sort();
    let mut want = vec![
        format!("bytes={start}-{}", start + 99),
        format!("bytes={}-{}", start + MIB - 200, start + MIB - 1),
    ];
    want.sort();
    assert_eq!(ranges, want);

    // An unbounded window: a closed head from its start, the object's suffix for the tail.
    let open = object.with_window(start, None).unwrap();
    let ends = client.read_ends(&open, 100, 200).unwrap();
    assert_eq!(ends.size, 10 * MIB - start);
    assert_eq!(ends.head, pattern(start, 100));
    assert_eq!(ends.tail, pattern(10 * MIB - 200, 200));
    let mut ranges = range_headers(&server.take_requests());
    ranges.sort();
    assert_eq!(
        ranges,
        ["bytes=-200".into(), format!("bytes={start}-{}", start + 99)]
    );
}

#[test]
fn if_match_passes_through_as_the_if_match_header() {
    let server = MockServer::start();
    server.insert_virtual("/o", MIB);
    let client = client();
    let object = locate(&client, &server, "/o");
    let etag = client.stat(&object).unwrap().etag.expect("a strong ETag");
    let c = drain(&client.submit([Read::new(&object, 10, 20).if_match(etag.clone())]))
        .pop()
        .unwrap();
    assert_ok(&c, 10, 20);
    let log = server.requests();
    assert_eq!(log.len(), 2);
    assert_eq!(log[0].header("if-match"), None, "stat sends no condition");
    assert_eq!(log[1].header("if-match"), Some(etag.as_str()));
    assert_eq!(log[1].range.as_deref(), Some("bytes=10-29"));
}

#[test]
fn a_small_unwanted_remainder_is_drained_and_the_connection_reused() {
    let server = MockServer::start();
    server.insert_virtual("/small", 200 * KIB);
    server.insert_virtual("/large", 4 * MIB);
    server.add_fault(FaultRule::new(Fault::IgnoreRange).path("/small").times(1));
    server.add_fault(FaultRule::new(Fault::IgnoreRange).path("/large").times(1));
    let client = build(quick().io_threads(1));
    // The server sends the whole object; Karu needs 10 bytes. A 200 KiB rest is drained, so
    // the next request rides the same connection; a 4 MiB rest is abandoned with it.
    let small = locate(&client, &server, "/small");
    let large = locate(&client, &server, "/large");
    assert_ok(&read_one(&client, &small, 0, 10), 0, 10);
    assert_ok(&read_one(&client, &small, 20, 10), 20, 10);
    assert_ok(&read_one(&client, &large, 0, 10), 0, 10);
    assert_ok(&read_one(&client, &large, 20, 10), 20, 10);
    let log = server.requests();
    let seen: Vec<(u16, u64)> = log.iter().map(|r| (r.status, r.connection)).collect();
    assert_eq!(
        seen,
        [(200, 1), (206, 1), (200, 1), (206, 2)],
        "{}",
        describe(&log)
    );
    assert_eq!(log[0].body_bytes, 200 * KIB);
    // Error answers with small bodies are drained too.
    assert_failed(
        &read_one(&client, &locate(&client, &server, "/missing"), 0, 1),
        Status::NotFound,
    );
    assert_ok(&read_one(&client, &large, 40, 10), 40, 10);
    let log = server.requests();
    assert_eq!(
        (log[4].connection, log[5].connection),
        (2, 2),
        "{}",
        describe(&log)
    );
}

#[test]
fn a_redirect_loop_and_disabled_redirects_fail_without_retries() {
    let server = MockServer::start();
    server.insert_virtual("/o", MIB);
    server.set_gate(Some(Arc::new(Redirect {
        from: "/loop".into(),
        to: "/loop".into(),
    })));
    let client = client();
    let c = read_one(&client, &locate(&client, &server, "/loop"), 0, 10);
    assert_failed(&c, Status::Protocol);
    // The first request and ten redirects, then a refusal.
    assert_eq!(server.take_requests().len(), 11);

    let client = build(quick().set("http_provider.follow_redirects", false));
    let c = read_one(&client, &locate(&client, &server, "/loop"), 0, 10);
    assert_failed(&c, Status::Http);
    assert_eq!(c.error().unwrap().http_status(), Some(302));
    assert_eq!(server.take_requests().len(), 1);
}

#[test]
fn a_name_that_does_not_resolve_is_a_network_error_after_three_attempts() {
    let client = client();
    let object = client.locate("http://karu-test.invalid/o").unwrap();
    let c = read_one(&client, &object, 0, 10);
    assert_failed(&c, Status::Network);
    let message = c.error().unwrap().message();
    assert!(message.contains("name resolution"), "{message}");
    assert_eq!(client.transport_stats().requests, 3, "{message}");
}

#[test]
fn http2_resumes_after_a_reset_connection() {
    let server = MockServer::builder().tls(true).http2(true).start().unwrap();
    server.insert_virtual("/o", 4 * MIB);
    server.set_etag("/o", Some("\"v1\""));
    server.add_fault(FaultRule::new(Fault::ResetAfter(100_000)).times(1));
    let ca = server.ca_file().unwrap();
    let client = build(
        quick()
            .set("http.version", "http2")
            .set("http.ca_file", ca.to_str().unwrap()),
    );
    let object = locate(&client, &server, "/o");
    assert_ok(&read_one(&client, &object, 0, MIB), 0, MIB);
    let log = server.requests();
    assert_eq!(log.len(), 2, "{}", describe(&log));
    let (resumed, last) = log[1].byte_range.unwrap();
    assert!(
        resumed > 0 && resumed <= 100_000 && last == MIB - 1,
        "{}",
        describe(&log)
    );
    assert_eq!(log[1].header("if-match"), Some("\"v1\""));
}

#[test]
fn query_strings_name_different_objects_and_stay_out_of_messages() {
    let server = MockServer::start();
    server.insert_virtual("/o", MIB);
    let client = client();
    let a = locate(&client, &server, "/o?version=1");
    let b = locate(&client, &server, "/o?version=2");
    let batch = client.submit([Read::new(&a, 0, 10), Read::new(&b, 10, 10)]);
    let done = drain(&batch);
    assert_ok(&done[0], 0, 10);
    assert_ok(&done[1], 10, 10);
    let mut seen: Vec<(Option<String>, Option<String>)> = server
        .take_requests()
        .into_iter()
        .map(|r| (r.query, r.range))
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        [
            (Some("version=1".into()), Some("bytes=0-9".into())),
            (Some("version=2".into()), Some("bytes=10-19".into())),
        ],
        "different queries never merge"
    );
    let c = read_one(
        &client,
        &locate(&client, &server, "/gone?sig=SECRET"),
        0,
        10,
    );
    assert_failed(&c, Status::NotFound);
    assert!(!c.error().unwrap().message().contains("SECRET"), "{c:?}");
    assert!(!format!("{c:?}").contains("SECRET"), "{c:?}");
}

#[test]
fn stat_of_a_server_ignoring_the_range_reads_the_size_without_the_object() {
    let server = MockServer::start();
    server.insert_virtual("/o", 256 * MIB);
    server.add_fault(FaultRule::new(Fault::IgnoreRange));
    let client = client();
    let info = client.stat(&locate(&client, &server, "/o")).unwrap();
    assert_eq!(info.size, Some(256 * MIB));
    let log = server.requests();
    assert_eq!((log.len(), log[0].status), (1, 200));
    assert!(
        client.transport_stats().body_bytes < 2 * MIB,
        "{:?}",
        client.transport_stats()
    );
}

#[test]
fn read_ends_fails_when_the_object_changes_between_its_two_answers() {
    let server = MockServer::start();
    server.insert_virtual("/o", MIB);
    server.add_fault(FaultRule::new(Fault::ChangeEtag).skip(1).times(1));
    let client = client();
    let e = client
        .read_ends(&locate(&client, &server, "/o"), 10, 10)
        .unwrap_err();
    assert_eq!(e.status(), Status::PreconditionFailed, "{e}");
    let log = server.requests();
    assert_eq!(log.len(), 2, "{}", describe(&log));
    assert!(log.iter().all(|r| r.status == 206));
}

#[test]
fn https_resumes_after_a_body_cut_without_a_tls_close() {
    let server = MockServer::builder().tls(true).start().unwrap();
    server.insert_virtual("/o", 4 * MIB);
    server.set_etag("/o", Some("\"v1\""));
    server.add_fault(FaultRule::new(Fault::CutBodyAfter(100_000)).times(1));
    let ca = server.ca_file().unwrap();
    let client = build(quick().set("http.ca_file", ca.to_str().unwrap()));
    let object = locate(&client, &server, "/o");
    assert_ok(&read_one(&client, &object, 7, MIB), 7, MIB);
    let log = server.requests();
    assert_eq!(
        range_headers(&log),
        [
            format!("bytes=7-{}", MIB + 6),
            format!("bytes=100007-{}", MIB + 6)
        ],
        "{}",
        describe(&log)
    );
    assert_eq!(log[1].header("if-match"), Some("\"v1\""));
}

#[test]
fn https_to_a_plain_http_port_is_one_attempt_naming_the_scheme() {
    let server = MockServer::start();
    server.insert_virtual("/o", MIB);
    let client = client();
    let url = server.url("/o").replacen("http://", "https://", 1);
    let c = read_one(&client, &client.locate(&url).unwrap(), 0, 100);
    assert_failed(&c, Status::Network);
    let message = c.error().unwrap().message();
    assert!(
        message.contains("plain HTTP") && message.contains("http://"),
        "{message}"
    );
    // The server read a ClientHello where it expected a request: no request, one connection.
    assert_eq!(
        (server.connections_accepted(), server.request_count()),
        (1, 0),
        "{message}"
    );
    let stats = client.transport_stats();
    assert_eq!((stats.requests, stats.retries), (1, 0), "{message}");
}

#[test]
fn http2_against_an_http1_only_server_is_one_attempt_naming_http_version() {
    // Over TLS the server refuses the `h2` ALPN offer; over plain TCP it drops the
    // prior-knowledge preface without a byte of HTTP/2.
    for tls in [true, false] {
        let server = MockServer::builder().tls(tls).start().unwrap();
        server.insert_virtual("/o", MIB);
        let mut builder = quick().set("http.version", "http2");
        if let Some(ca) = server.ca_file() {
            builder = builder.set("http.ca_file", ca.to_str().unwrap());
        }
        let client = build(builder);
        let c = read_one(&client, &locate(&client, &server, "/o"), 0, 100);
        assert_failed(&c, Status::Network);
        let message = c.error().unwrap().message();
        assert!(message.contains("http.version"), "tls {tls}: {message}");
        assert_eq!(
            (server.connections_accepted(), server.request_count()),
            (1, 0),
            "tls {tls}: {message}"
        );
        let stats = client.transport_stats();
        assert_eq!(
            (stats.requests, stats.retries),
            (1, 0),
            "tls {tls}: {message}"
        );
    }
}

/// A client of `server` (HTTPS) with a 200 ms connect timeout.
fn short_connect_timeout(server: &MockServer) -> karu::Client {
    let ca = server.ca_file().unwrap();
    build(
        quick()
            .set("http.ca_file", ca.to_str().unwrap())
            .set("http.connect_timeout", "200ms")
            .set("http.low_speed_time", "1s"),
    )
}

#[test]
fn a_tls_handshake_that_never_completes_fails_at_the_connect_timeout_after_three_attempts() {
    let server = MockServer::builder().tls(true).start().unwrap();
    server.insert_virtual("/o", MIB);
    server.silence_connections(u64::MAX);
    let client = short_connect_timeout(&server);
    let c = read_one(&client, &locate(&client, &server, "/o"), 0, 100);
    assert_failed(&c, Status::TimedOut);
    let message = c.error().unwrap().message();
    // A connect failure: three attempts, each a TCP connection whose ClientHello went
    // unanswered, and not one request.
    assert_eq!(
        (server.connections_accepted(), server.request_count()),
        (3, 0),
        "{message}"
    );
    let stats = client.transport_stats();
    assert_eq!((stats.requests, stats.retries), (3, 2), "{message}");
    assert!(message.contains("http.connect_timeout"), "{message}");
}

#[test]
fn a_stalled_tls_handshake_is_abandoned_at_the_connect_timeout_and_the_next_one_serves() {
    let server = MockServer::builder().tls(true).start().unwrap();
    server.insert_virtual("/o", MIB);
    server.silence_connections(1);
    let client = short_connect_timeout(&server);
    let object = locate(&client, &server, "/o");
    assert_ok(&read_one(&client, &object, 7, 100), 7, 100);
    let log = server.requests();
    assert_eq!(server.connections_accepted(), 2, "{}", describe(&log));
    assert_eq!(
        log.iter()
            .map(|r| (r.byte_range, r.connection))
            .collect::<Vec<_>>(),
        [(Some((7, 106)), 2)],
        "{}",
        describe(&log)
    );
    let stats = client.transport_stats();
    assert_eq!((stats.requests, stats.retries), (2, 1));
}

#[test]
fn an_unwanted_rest_of_256_kib_is_drained_and_one_byte_more_closes_the_connection() {
    const DRAIN: u64 = 256 * KIB;
    let server = MockServer::start();
    // The server answers with the whole object; Karu wants its first 10 bytes.
    server.insert_virtual("/at", 10 + DRAIN);
    server.insert_virtual("/past", 10 + DRAIN + 1);
    server.add_fault(FaultRule::new(Fault::IgnoreRange).path("/at").times(1));
    server.add_fault(FaultRule::new(Fault::IgnoreRange).path("/past").times(1));
    let client = build(quick().io_threads(1));
    let at = locate(&client, &server, "/at");
    let past = locate(&client, &server, "/past");
    assert_ok(&read_one(&client, &at, 0, 10), 0, 10);
    assert_eq!(
        client.transport_stats().body_bytes,
        10 + DRAIN,
        "the rest was read to its end"
    );
    assert_ok(&read_one(&client, &at, 20, 10), 20, 10);
    assert_ok(&read_one(&client, &past, 0, 10), 0, 10);
    assert_ok(&read_one(&client, &past, 20, 10), 20, 10);
    let log = server.requests();
    let seen: Vec<(&str, u16, u64)> = log
        .iter()
        .map(|r| (r.path.as_str(), r.status, r.connection))
        .collect();
    assert_eq!(
        seen,
        [
            ("/at", 200, 1),
            ("/at", 206, 1),
            ("/past", 200, 1),
            ("/past", 206, 2)
        ],
        "{}",
        describe(&log)
    );
}

/// Answers `GET /err/N` with a 404 whose body is [`error_body`]`(N)`.
#[derive(Debug)]
struct ErrorBodies;

impl Gate for ErrorBodies {
    fn check(&self, request: &RequestHead) -> Option<GateResponse> {
        let len: usize = request.path.strip_prefix("/err/")?.parse().ok()?;
        Some(GateResponse::new(404, error_body(len)))
    }
}

/// `len` printable bytes, none equal to its neighbours' pattern (so a misplaced byte shows).
fn error_body(len: usize) -> Vec<u8> {
    (0..len).map(|i| b'a' + (i % 23) as u8).collect()
}

/// What a test backend serving `scheme://` as plain HTTP resolves `address` to: the same URL
/// under `http://` as the canonical path, with no container.
fn as_plain_http(address: &str, scheme: &str) -> Resolved {
    let url = address.replacen(&format!("{scheme}://"), "http://", 1);
    Resolved::remote(CanonicalPath::new(url), None, String::new())
}

/// Plain HTTP under `rec://`, recording the error bodies the engine hands to its backend's
/// correction hook (the bytes it kept).
#[derive(Debug, Default)]
struct Recorder {
    kept: Mutex<Vec<Vec<u8>>>,
}

impl Backend for Recorder {
    fn name(&self) -> &str {
        "rec"
    }

    fn resolve(&self, address: &str) -> Result<Resolved, Error> {
        Ok(as_plain_http(address, "rec"))
    }

    fn prepare(&self, ctx: &PrepareContext<'_>) -> Result<PreparedRequest, Error> {
        PreparedRequest::get(ctx.locator.canonical().as_str(), ctx)
    }

    fn correction(&self, response: &ErrorResponse<'_>) -> Option<Correction> {
        self.kept.lock().unwrap().push(response.body.to_vec());
        None
    }
}

#[test]
fn error_bodies_keep_exactly_4_kib_and_drain_at_most_256_kib_beyond_it() {
    const KEEP: u64 = 4 * KIB;
    const DRAIN: u64 = 256 * KIB;
    let server = MockServer::start();
    server.insert_virtual("/o", MIB);
    server.set_gate(Some(Arc::new(ErrorBodies)));
    let recorder = Arc::new(Recorder::default());
    let client = build(with_backend(
        quick().io_threads(1),
        "rec",
        None,
        recorder.clone(),
    ));
    let good = client
        .locate(&format!("rec://{}/o", server.addr()))
        .unwrap();
    // (error body length, whether the connection survives it)
    let cases = [
        (KEEP, true),
        (KEEP + 1, true),
        (KEEP + DRAIN, true),
        (KEEP + DRAIN + 1, false),
    ];
    for (len, reused) in cases {
        let bad = client
            .locate(&format!("rec://{}/err/{len}", server.addr()))
            .unwrap();
        let c = read_one(&client, &bad, 0, 10);
        assert_failed(&c, Status::NotFound);
        assert_eq!(c.error().unwrap().http_status(), Some(404));
        // The next read shows whether the error answer's connection went back to the pool.
        assert_ok(&read_one(&client, &good, 0, 10), 0, 10);
        let log = server.take_requests();
        assert_eq!(
            log.iter().map(|r| r.status).collect::<Vec<_>>(),
            [404, 206],
            "{}",
            describe(&log)
        );
        assert_eq!(
            log[1].connection == log[0].connection,
            reused,
            "an error body of {len} bytes:\n{}",
            describe(&log)
        );
        let kept = recorder.kept.lock().unwrap().pop().expect("an error body");
        let body = error_body(len as usize);
        assert_eq!(kept.len() as u64, len.min(KEEP), "an error body of {len}");
        assert!(
            kept == body[..kept.len()],
            "the kept bytes are not the body's first"
        );
    }
}

/// Plain HTTP under `keep://`, following redirects and keeping every location for an hour,
/// without `resolve_once` (a backend whose first requests are not coordinated).
#[derive(Debug)]
struct Keeper;

impl Backend for Keeper {
    fn name(&self) -> &str {
        "keep"
    }

    fn resolve(&self, address: &str) -> Result<Resolved, Error> {
        Ok(as_plain_http(address, "keep"))
    }

    fn prepare(&self, ctx: &PrepareContext<'_>) -> Result<PreparedRequest, Error> {
        let mut request = PreparedRequest::get(ctx.locator.canonical().as_str(), ctx)?;
        request.options.follow_redirects = true;
        Ok(request)
    }

    fn reusable_location(
        &self,
        _locator: &Locator,
        _snapshot: &Snapshot,
        _location: &http::Uri,
        _now: std::time::SystemTime,
    ) -> Option<Duration> {
        Some(Duration::from_secs(3600))
    }
}

#[test]
fn a_location_kept_at_the_first_redirect_serves_the_later_reads_of_its_object() {
    // No location is kept and none is in flight when the first read starts: the engine builds
    // the location's key only at the redirect, and must still keep the location under it.
    let first = MockServer::start();
    let second = MockServer::start();
    second.insert_virtual("/elsewhere", MIB);
    first.set_gate(Some(Arc::new(Redirect {
        from: "/away".into(),
        to: second.url("/elsewhere"),
    })));
    let client = build(with_backend(quick(), "keep", None, Arc::new(Keeper)));
    let object = client
        .locate(&format!("keep://{}/away", first.addr()))
        .unwrap();
    for i in 0..3 {
        assert_ok(&read_one(&client, &object, i * 1000, 100), i * 1000, 100);
    }
    let a = first.take_requests();
    assert_eq!(
        a.iter()
            .map(|r| (r.path.as_str(), r.status))
            .collect::<Vec<_>>(),
        [("/away", 302)],
        "{}",
        describe(&a)
    );
    let b = second.take_requests();
    assert_eq!(
        b.iter()
            .map(|r| (r.path.as_str(), r.status))
            .collect::<Vec<_>>(),
        [("/elsewhere", 206); 3],
        "{}",
        describe(&b)
    );
    assert_eq!(
        range_headers(&b),
        ["bytes=0-99", "bytes=1000-1099", "bytes=2000-2099"]
    );
}

/// A CA file that is missing, holds no certificate or holds one that is not a certificate
/// fails the client's build, naming the setting and the file, before any request; so does a
/// path that is no regular file (a FIFO hung the build, `/dev/zero` filled memory).
#[test]
fn a_ca_file_that_cannot_serve_fails_the_build_naming_the_setting() {
    let dir = tempfile::tempdir().unwrap();
    let garbage =
        "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n";
    let fifo = dir.path().join("fifo.pem");
    karu_testkit::make_fifo(&fifo);
    for special in [fifo.as_path(), std::path::Path::new("/dev/zero")] {
        // Neither hangs the build nor is read until memory runs out.
        let err = quick()
            .set("http.ca_file", special.to_str().unwrap())
            .build()
            .unwrap_err();
        let expected = format!(
            "cannot read the CA file {} (http.ca_file): not a regular file",
            special.display()
        );
        assert!(err.message().starts_with(&expected), "{err}");
    }
    for (name, text, problem) in [
        (
            "missing.pem",
            None,
            "cannot read the CA file {} (http.ca_file): ",
        ),
        (
            "empty.pem",
            Some(""),
            "the CA file {} (http.ca_file) holds no certificate",
        ),
        (
            "text.pem",
            Some("not a certificate\n"),
            "the CA file {} (http.ca_file) holds no certificate",
        ),
        (
            "garbage.pem",
            Some(garbage),
            "the CA file {} (http.ca_file) holds an unusable certificate: ",
        ),
    ] {
        let path = dir.path().join(name);
        if let Some(text) = text {
            std::fs::write(&path, text).unwrap();
        }
        let err = quick()
            .set("http.ca_file", path.to_str().unwrap())
            .build()
            .unwrap_err();
        assert_eq!(err.status(), Status::InvalidArgument, "{err}");
        let expected = problem.replace("{}", &path.display().to_string());
        assert!(err.message().starts_with(&expected), "{name}: {err}");
    }
}

/// An address too long for a request line fails its own read, and every message quotes a
/// long address clipped to its start and end: a megabyte-long address gives a message of a
/// few hundred bytes, not a megabyte. The read beside it is unaffected.
#[test]
fn a_read_of_an_address_too_long_for_a_request_fails_alone_with_a_short_message() {
    let server = MockServer::start();
    server.insert_virtual("/o", MIB);
    let client = client();
    let fine = locate(&client, &server, "/o");
    for length in [100_000, 1_000_000] {
        let name = format!("/{}{}", "a".repeat(length), "-the-end");
        let long = client.locate(&server.url(&name)).unwrap();
        let done = drain(&client.submit([Read::new(&long, 0, 10), Read::new(&fine, 5, 10)]));
        assert_failed(&done[0], Status::InvalidArgument);
        let message = done[0].error().unwrap().to_string();
        assert!(
            message.len() < 1_000,
            "{} bytes: {message:.300}",
            message.len()
        );
        assert!(
            message.contains("cannot build a request URL for http://127.0.0.1:")
                && message.contains("-the-end")
                && message.contains(&format!("…({} bytes)…", server.url(&name).len() - 448)),
            "{message}"
        );
        assert_ok(&done[1], 5, 10);
        // An address no provider accepts is quoted clipped too.
        let bad = format!("s3://No_Bucket/{}", "k".repeat(length));
        let message = client.locate(&bad).unwrap_err().to_string();
        assert!(
            message.len() < 1_000,
            "{} bytes: {message:.300}",
            message.len()
        );
        assert!(message.contains("s3://No_Bucket/kkk"), "{message}");
    }
    assert_eq!(
        server.request_count(),
        2,
        "{}",
        describe(&server.requests())
    );
}
