//! Adaptive concurrency against a server that throttles: the mock serves at most a few
//! requests at once and answers the others `503 SlowDown` (S3) or `429` (GCS, Hugging Face).
//! Every read still arrives with exact bytes, and the request log shows that the client backs
//! off to the server's limit instead of retrying blindly at its own concurrency.

#[path = "support/http.rs"]
mod http_support;

use std::time::Duration;

use http_support::{assert_ok, build, drain, locate, quick};
use karu::{BatchOptions, Read};
use karu_testkit::{Fault, FaultRule, MockServer};

const KIB: u64 = 1 << 10;
/// Requests the server serves at once.
const LIMIT: u64 = 8;
/// Karu's concurrency: four times the server's limit.
const CONCURRENCY: usize = 32;
const READS: u64 = 600;

/// Throttled answers and all requests of a run of `READS` scattered 4 KiB reads, never merged,
/// against a server that answers `code` above `LIMIT` requests in flight.
fn throttled_run(code: u16, adaptive: bool) -> (usize, usize) {
    let server = MockServer::builder()
        .latency(Duration::from_millis(2))
        .start()
        .expect("the mock server starts");
    server.insert_virtual("/o", 64 << 20);
    server.add_fault(FaultRule::new(Fault::ThrottleAbove { limit: LIMIT, code }));
    // Without hedging: every request is counted.
    let client = build(
        karu_testkit::reads::without_hedging(quick())
            .set("concurrency", CONCURRENCY)
            .set("adaptive_concurrency", adaptive)
            // Enough attempts that blind retries also finish: the comparison is of throttled
            // answers, not of failures.
            .set("retry.attempts", 100),
    );
    let object = locate(&client, &server, "/o");
    let reads: Vec<(u64, u64)> = (0..READS)
        .map(|i| ((i * 7919 % READS) * 100 * KIB + i, 4 * KIB))
        .collect();
    let batch = client.submit_with(
        reads.iter().map(|&(o, l)| Read::new(&object, o, l)),
        &BatchOptions::new().max_gap(0),
    );
    let done = drain(&batch);
    assert_eq!(done.len(), reads.len());
    for (c, &(o, l)) in done.iter().zip(&reads) {
        assert_ok(c, o, l);
    }
    let log = server.requests();
    let throttled = log.iter().filter(|r| r.status == code).count();
    let served: Vec<_> = log.iter().filter(|r| r.status == 206).cloned().collect();
    // Every read was served exactly once; the rest of the log is throttled answers.
    karu_testkit::reads::assert_requests(&served, reads.len());
    assert_eq!(served.len() + throttled, log.len());
    (throttled, log.len())
}

#[track_caller]
fn assert_backs_off(code: u16) {
    let (throttled, requests) = throttled_run(code, true);
    // Adapting, the window is cut from 32 towards the limit of 8 in the first round trips,
    // then saws between 6 and 9: about one request in ten is throttled (a blind client at 32
    // in flight: a third or more, see below).
    assert!(
        throttled * 5 < requests,
        "{throttled} throttled answers of {requests} requests"
    );
}

#[test]
fn reads_against_an_s3_style_throttling_server_all_succeed_with_few_slow_downs() {
    assert_backs_off(503);
}

#[test]
fn reads_against_a_429_throttling_server_all_succeed_with_few_throttled_answers() {
    assert_backs_off(429);
}

#[test]
fn without_adaptation_the_same_reads_meet_many_more_throttled_answers() {
    let (blind, blind_requests) = throttled_run(503, false);
    let (adaptive, adaptive_requests) = throttled_run(503, true);
    assert!(
        blind * 5 >= blind_requests,
        "{blind} of {blind_requests} requests throttled without adaptation"
    );
    assert!(
        adaptive * 2 < blind,
        "adaptive {adaptive} of {adaptive_requests}, blind {blind} of {blind_requests}"
    );
}
