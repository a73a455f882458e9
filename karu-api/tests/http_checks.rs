//! Checked responses and recovery against the mock server's faults: one test per fault, each
//! asserting the read's status and bytes and, from the request log, how many requests were
//! made and which ranges (and conditions) they asked for.

#[path = "support/http.rs"]
mod http_support;

use std::time::Duration;

use http_support::{
    KIB, MIB, PATIENCE, assert_failed, assert_ok, build, client, describe, drain, locate, quick,
    range_headers, read_all, read_one, wait_for_requests,
};
use karu::{ContentRange, Evidence, Mismatch, Next, RangeSpec, Read, Rejection, Status};
use karu_testkit::{Fault, FaultRule, MockServer};

/// An object with a known strong ETag.
const ETAG: &str = "\"v1\"";

fn server_with(path: &str, size: u64) -> MockServer {
    let server = MockServer::start();
    server.insert_virtual(path, size);
    server.set_etag(path, Some(ETAG));
    server
}

fn status(code: u16) -> Fault {
    Fault::Status {
        code,
        retry_after: None,
    }
}

#[test]
fn ignored_range_under_the_fallback_limit_still_delivers_exact_bytes() {
    let server = server_with("/o", 2 * MIB);
    server.add_fault(FaultRule::new(Fault::IgnoreRange).times(1));
    let client = client();
    let object = locate(&client, &server, "/o");
    let c = read_one(&client, &object, MIB + 3, 1000);
    assert_ok(&c, MIB + 3, 1000);
    let log = server.requests();
    assert_eq!(
        range_headers(&log),
        ["bytes=1048579-1049578"],
        "{}",
        describe(&log)
    );
    assert_eq!(log[0].status, 200, "the server ignored the range");
}

#[test]
fn ignored_range_beyond_the_fallback_limit_fails_without_downloading_the_object() {
    const SIZE: u64 = 256 * MIB;
    let server = server_with("/o", SIZE);
    server.add_fault(FaultRule::new(Fault::IgnoreRange));
    let client = build(quick().set("http.fallback_limit", "1MiB"));
    let object = locate(&client, &server, "/o");
    // The prefix to discard (32 MiB) is beyond the limit: refused at the response head.
    let c = read_one(&client, &object, 32 * MIB, 100);
    assert_failed(&c, Status::Protocol);
    let error = c.error().unwrap();
    assert_eq!(
        (error.evidence(), error.http_status()),
        (
            Some(&Evidence::Response(Rejection::BeyondFallback {
                first: 32 * MIB,
                limit: MIB
            })),
            Some(200)
        ),
        "{c:?}"
    );
    assert!(!error.is_transient());
    // The limit is exact: discarding 1 MiB is allowed, one byte more is not.
    assert_ok(&read_one(&client, &object, MIB, 100), MIB, 100);
    assert_failed(&read_one(&client, &object, MIB + 1, 100), Status::Protocol);
    let log = server.requests();
    assert_eq!(
        log.len(),
        3,
        "a refused response is not retried:\n{}",
        describe(&log)
    );
    assert_eq!(log[0].status, 200);
    // The connection was dropped at the head: the server could push only what the socket
    // buffers hold, far from the 256 MiB object.
    assert!(
        log[0].body_bytes < 32 * MIB,
        "the object was downloaded: {} bytes sent",
        log[0].body_bytes
    );
    let stats = client.transport_stats();
    assert!(
        stats.body_bytes < 3 * MIB,
        "the client received {} body bytes",
        stats.body_bytes
    );
}

#[test]
fn a_wrong_content_range_is_a_protocol_error_and_not_retried() {
    let server = server_with("/o", MIB);
    server.add_fault(FaultRule::new(Fault::WrongContentRange { shift: 10 }).times(1));
    server.add_fault(
        FaultRule::new(Fault::WrongContentRange { shift: -10 })
            .skip(1)
            .times(1),
    );
    let client = client();
    let object = locate(&client, &server, "/o");
    // The evidence: the range asked for, the one the server stated, and how they differ.
    let unexpected = |first: u64, actual_first: u64| {
        Evidence::Response(Rejection::UnexpectedRange {
            expected: RangeSpec::Closed {
                first,
                last: first + 99,
            },
            actual: ContentRange::Bytes {
                first: actual_first,
                last: actual_first + 99,
                total: Some(MIB),
            },
            mismatch: Mismatch::StartsElsewhere,
        })
    };
    let c = read_one(&client, &object, 1000, 100);
    assert_failed(&c, Status::Protocol);
    let error = c.error().unwrap();
    assert_eq!(error.evidence(), Some(&unexpected(1000, 1010)), "{c:?}");
    assert_eq!(error.http_status(), Some(206));
    let c = read_one(&client, &object, 2000, 100);
    assert_failed(&c, Status::Protocol);
    assert_eq!(c.error().unwrap().evidence(), Some(&unexpected(2000, 1990)));
    let log = server.requests();
    assert_eq!(
        range_headers(&log),
        ["bytes=1000-1099", "bytes=2000-2099"],
        "{}",
        describe(&log)
    );
    assert!(log.iter().all(|r| r.status == 206));
}

#[test]
fn a_missing_content_range_is_a_protocol_error_and_not_retried() {
    let server = server_with("/o", MIB);
    server.add_fault(FaultRule::new(Fault::MissingContentRange));
    let client = client();
    let object = locate(&client, &server, "/o");
    let c = read_one(&client, &object, 10, 10);
    assert_failed(&c, Status::Protocol);
    assert_eq!(
        c.error().unwrap().evidence(),
        Some(&Evidence::Response(Rejection::NoContentRange {
            status: 206
        })),
        "{c:?}"
    );
    assert_eq!(
        server.request_count(),
        1,
        "{}",
        describe(&server.requests())
    );
}

/// A read of `len` bytes at `first` whose first response is cut by `fault` after `n` bytes:
/// returns the two logged requests after checking the bytes.
fn interrupted_once(fault: Fault, etag: Option<&str>) -> Vec<karu_testkit::RequestRecord> {
    let server = MockServer::start();
    server.insert_virtual("/o", 4 * MIB);
    server.set_etag("/o", etag);
    server.add_fault(FaultRule::new(fault).times(1));
    let client = client();
    let object = locate(&client, &server, "/o");
    let c = read_one(&client, &object, 1000, 300 * KIB);
    assert_ok(&c, 1000, 300 * KIB);
    assert_eq!(client.transport_stats().retries, 1);
    server.requests()
}

#[test]
fn a_cut_body_with_a_strong_etag_resumes_from_the_first_missing_byte_with_if_match() {
    let log = interrupted_once(Fault::CutBodyAfter(30_000), Some(ETAG));
    let last = 1000 + 300 * KIB - 1;
    assert_eq!(
        range_headers(&log),
        [format!("bytes=1000-{last}"), format!("bytes=31000-{last}")],
        "{}",
        describe(&log)
    );
    assert_eq!(log[0].header("if-match"), None);
    assert_eq!(log[1].header("if-match"), Some(ETAG));
    assert_eq!((log[0].body_bytes, log[1].status), (30_000, 206));
}

#[test]
fn a_reset_with_a_strong_etag_resumes_with_if_match_and_nothing_is_fetched_twice() {
    let log = interrupted_once(Fault::ResetAfter(70_000), Some(ETAG));
    let last = 1000 + 300 * KIB - 1;
    assert_eq!(log.len(), 2, "{}", describe(&log));
    let (first, _) = log[0].byte_range.unwrap();
    let (resumed, end) = log[1].byte_range.unwrap();
    assert_eq!((first, end), (1000, last));
    // The resume starts where the kept bytes end: after some, and no more than were sent.
    let kept = resumed - first;
    assert!(
        kept > 0 && kept <= 70_000,
        "resumed at {resumed}:\n{}",
        describe(&log)
    );
    assert_eq!(log[1].header("if-match"), Some(ETAG));
}

#[test]
fn without_a_strong_etag_an_interrupted_read_restarts_from_its_first_byte() {
    let last = 1000 + 300 * KIB - 1;
    for etag in [None, Some("W/\"weak\"")] {
        for fault in [Fault::CutBodyAfter(30_000), Fault::ResetAfter(30_000)] {
            let log = interrupted_once(fault.clone(), etag);
            assert_eq!(
                range_headers(&log),
                [format!("bytes=1000-{last}"), format!("bytes=1000-{last}")],
                "{etag:?} {fault:?}:\n{}",
                describe(&log)
            );
            assert!(log.iter().all(|r| r.header("if-match").is_none()));
        }
    }
}

#[test]
fn a_merged_transfer_interrupted_once_fills_every_part_exactly() {
    let server = server_with("/o", 4 * MIB);
    server.add_fault(FaultRule::new(Fault::CutBodyAfter(100_000)).times(1));
    let client = client();
    let object = locate(&client, &server, "/o");
    let reads = [
        (0, 50_000),
        (40_000, 70_000),
        (150_000, 10),
        (150_000, 10),
        (199_990, 10),
    ];
    let done = read_all(&client, &object, &reads);
    for (c, &(o, l)) in done.iter().zip(&reads) {
        assert_ok(c, o, l);
    }
    let log = server.requests();
    assert_eq!(
        range_headers(&log),
        ["bytes=0-199999", "bytes=100000-199999"],
        "{}",
        describe(&log)
    );
    assert_eq!(log[1].header("if-match"), Some(ETAG));
}

#[test]
fn a_gzip_transformed_answer_is_a_protocol_error_and_not_retried() {
    let server = server_with("/o", MIB);
    server.add_fault(FaultRule::new(Fault::Gzip));
    let client = client();
    let object = locate(&client, &server, "/o");
    let c = read_one(&client, &object, 0, 64 * KIB);
    assert_failed(&c, Status::Protocol);
    let log = server.requests();
    assert_eq!(log.len(), 1, "{}", describe(&log));
    assert_eq!(log[0].header("accept-encoding"), Some("identity"));
}

#[test]
fn an_etag_change_between_attempts_discards_the_partial_data_and_restarts() {
    let server = server_with("/o", 4 * MIB);
    server.add_fault(FaultRule::new(Fault::CutBodyAfter(30_000)).times(1));
    // The object changes before the resumed request: its saved tag no longer matches.
    server.add_fault(FaultRule::new(Fault::ChangeEtag).skip(1).times(1));
    let client = client();
    let object = locate(&client, &server, "/o");
    let c = read_one(&client, &object, 1000, 300 * KIB);
    assert_ok(&c, 1000, 300 * KIB);
    let last = 1000 + 300 * KIB - 1;
    let log = server.requests();
    assert_eq!(
        range_headers(&log),
        [
            format!("bytes=1000-{last}"),
            format!("bytes=31000-{last}"),
            format!("bytes=1000-{last}"),
        ],
        "{}",
        describe(&log)
    );
    let statuses: Vec<u16> = log.iter().map(|r| r.status).collect();
    assert_eq!(statuses, [206, 412, 206]);
    assert_eq!(log[1].header("if-match"), Some(ETAG));
    assert_eq!(
        log[2].header("if-match"),
        None,
        "the restart is not pinned to the old tag"
    );
}

#[test]
fn a_wildcard_or_a_tag_list_condition_restarts_the_range_after_a_cut() {
    // A condition that may accept another version cannot vouch for the bytes already kept:
    // the retry asks for the whole range again, with the caller's condition, not the rest.
    let whole = format!("bytes=1000-{}", 1000 + 300 * KIB - 1);
    let cases: [(&str, bool); 2] = [("*", true), ("\"v0\", \"v1\"", false)];
    for (condition, change) in cases {
        let server = server_with("/o", 4 * MIB);
        server.add_fault(FaultRule::new(Fault::CutBodyAfter(30_000)).times(1));
        if change {
            // The object changes before the retry; the wildcard still accepts it.
            server.add_fault(FaultRule::new(Fault::ChangeEtag).skip(1).times(1));
        }
        let client = client();
        let object = locate(&client, &server, "/o");
        let c = drain(&client.submit([Read::new(&object, 1000, 300 * KIB).if_match(condition)]))
            .pop()
            .unwrap();
        assert_ok(&c, 1000, 300 * KIB);
        let log = server.requests();
        assert_eq!(
            log.iter()
                .map(|r| (r.range.as_deref(), r.header("if-match"), r.status))
                .collect::<Vec<_>>(),
            [
                (Some(whole.as_str()), Some(condition), 206),
                (Some(whole.as_str()), Some(condition), 206),
            ],
            "{condition}:\n{}",
            describe(&log)
        );
        assert_eq!(log[0].body_bytes, 30_000, "{}", describe(&log));
    }
}

#[test]
fn a_callers_if_match_that_does_not_match_fails_that_read_only() {
    let server = server_with("/o", MIB);
    let client = client();
    let object = locate(&client, &server, "/o");
    let batch = client.submit([
        Read::new(&object, 0, 100).if_match("\"other\""),
        Read::new(&object, 100, 100),
        Read::new(&object, 200, 100).if_match(ETAG),
    ]);
    let done = drain(&batch);
    assert_failed(&done[0], Status::PreconditionFailed);
    assert_ok(&done[1], 100, 100);
    assert_ok(&done[2], 200, 100);
    let log = server.requests();
    assert_eq!(
        log.len(),
        3,
        "the failed condition is not retried:\n{}",
        describe(&log)
    );
    let failed: Vec<_> = log.iter().filter(|r| r.status == 412).collect();
    assert_eq!(failed.len(), 1, "{}", describe(&log));
    assert_eq!(failed[0].range.as_deref(), Some("bytes=0-99"));
    assert_eq!(failed[0].header("if-match"), Some("\"other\""));
}

#[test]
fn a_server_ignoring_if_match_is_caught_by_karus_own_etag_check() {
    let server = server_with("/o", MIB);
    server.add_fault(FaultRule::new(Fault::IgnoreIfMatch));
    let client = client();
    let object = locate(&client, &server, "/o");
    let batch = client.submit([
        Read::new(&object, 0, 100).if_match("\"other\""),
        Read::new(&object, 100, 100).if_match(ETAG),
    ]);
    let done = drain(&batch);
    assert_failed(&done[0], Status::PreconditionFailed);
    assert_ok(&done[1], 100, 100);
    let log = server.requests();
    assert_eq!(log.len(), 2, "{}", describe(&log));
    assert!(
        log.iter().all(|r| r.status == 206),
        "the server served both"
    );
}

#[test]
fn server_errors_are_retried_then_the_read_succeeds() {
    let server = server_with("/o", MIB);
    server.add_fault(FaultRule::new(status(500)).times(1));
    server.add_fault(FaultRule::new(status(503)).skip(1).times(1));
    let client = client();
    let object = locate(&client, &server, "/o");
    assert_ok(&read_one(&client, &object, 500, 5000), 500, 5000);
    let log = server.requests();
    let statuses: Vec<u16> = log.iter().map(|r| r.status).collect();
    assert_eq!(statuses, [500, 503, 206], "{}", describe(&log));
    assert!(
        log.iter()
            .all(|r| r.range.as_deref() == Some("bytes=500-5499"))
    );
    assert_eq!(client.transport_stats().retries, 2);
}

#[test]
fn retry_after_on_429_delays_the_next_attempt() {
    let server = server_with("/o", MIB);
    server.add_fault(
        FaultRule::new(Fault::Status {
            code: 429,
            retry_after: Some("1".into()),
        })
        .times(1),
    );
    let client = client();
    let object = locate(&client, &server, "/o");
    let batch = client.submit([Read::new(&object, 0, 100)]);
    // When each request reached the server (seen by a 1 ms poll of the log).
    let first = wait_for_requests(&server, 1);
    let second = wait_for_requests(&server, 2);
    let done = drain(&batch);
    assert_ok(&done[0], 0, 100);
    let log = server.requests();
    let statuses: Vec<u16> = log.iter().map(|r| r.status).collect();
    assert_eq!(statuses, [429, 206], "{}", describe(&log));
    // The retry honoured Retry-After (not the 10-50 ms backoff), allowing for the poll.
    let gap = second - first;
    assert!(
        gap >= Duration::from_millis(990),
        "the second attempt came {gap:?} later"
    );
}

#[test]
fn an_oversized_error_body_fails_after_the_retries_with_a_short_message() {
    let server = server_with("/o", MIB);
    server.add_fault(FaultRule::new(Fault::OversizedErrorBody {
        code: 500,
        size: MIB as usize,
    }));
    let client = build(quick().set("retry.attempts", 3));
    let object = locate(&client, &server, "/o");
    let c = read_one(&client, &object, 0, 100);
    assert_failed(&c, Status::Http);
    let error = c.error().unwrap();
    assert_eq!(error.http_status(), Some(500));
    assert!(
        error.message().chars().count() <= 400,
        "{} characters: {}",
        error.message().chars().count(),
        error.message()
    );
    assert!(error.is_transient(), "a 500 may pass: {error:?}");
    let log = server.requests();
    assert_eq!(log.len(), 3, "{}", describe(&log));
    assert!(log.iter().all(|r| r.status == 500));
    // Karu kept a few KiB of each body, not the mebibyte.
    let received = client.transport_stats().body_bytes;
    assert!(
        received < 3 * 300 * KIB,
        "received {received} bytes of error bodies"
    );
}

#[test]
fn a_trickle_below_the_low_speed_limit_is_aborted_and_retried() {
    let server = server_with("/o", MIB);
    server.add_fault(
        FaultRule::new(Fault::Trickle {
            chunk: 10,
            interval: Duration::from_millis(100),
        })
        .times(1),
    );
    let client = build(
        quick()
            .set("http.low_speed_limit", 1000)
            .set("http.low_speed_time", "1s"),
    );
    let object = locate(&client, &server, "/o");
    let c = read_one(&client, &object, 0, 100_000);
    assert_ok(&c, 0, 100_000);
    let log = server.requests();
    assert_eq!(log.len(), 2, "{}", describe(&log));
    // The first answer sent about 100 bytes in the one-second window before it was aborted;
    // the retry resumed after what had arrived, pinned to the ETag.
    let trickled = log[0].body_bytes;
    assert!(trickled > 0 && trickled < 1000, "{}", describe(&log));
    let (resumed, last) = log[1].byte_range.unwrap();
    assert!(resumed <= trickled && last == 99_999, "{}", describe(&log));
    if resumed > 0 {
        assert_eq!(log[1].header("if-match"), Some(ETAG));
    }
}

#[test]
fn a_server_that_never_answers_times_out_at_the_deadline() {
    let server = server_with("/o", MIB);
    server.add_fault(FaultRule::new(Fault::NeverAnswer));
    let client = build(quick().set("retry.deadline", "1s"));
    let object = locate(&client, &server, "/o");
    let batch = client.submit([Read::new(&object, 0, 100)]);
    // The deadline holds: the completion comes (well before the test's patience runs out).
    let c = match batch.next_timeout(PATIENCE) {
        Next::Completion(c) => c,
        other => panic!("no completion: {other:?}"),
    };
    assert_failed(&c, Status::TimedOut);
    assert_eq!(c.timing().attempts(), 1, "{c:?}");
    let log = server.requests();
    assert_eq!(
        log.len(),
        1,
        "no time was left for a second attempt:\n{}",
        describe(&log)
    );
    assert_eq!(log[0].status, 0, "never answered");
}

#[test]
fn latency_still_delivers_exact_bytes() {
    let server = server_with("/o", MIB);
    server.add_fault(FaultRule::new(Fault::Latency(Duration::from_millis(200))));
    let client = client();
    let object = locate(&client, &server, "/o");
    let done = read_all(
        &client,
        &object,
        &[(0, 10), (100, 10), (600 * KIB, 4 * KIB)],
    );
    assert_ok(&done[0], 0, 10);
    assert_ok(&done[1], 100, 10);
    assert_ok(&done[2], 600 * KIB, 4 * KIB);
    let log = server.requests();
    assert_eq!(log.len(), 2, "{}", describe(&log));
    assert!(log.iter().all(|r| r.status == 206 && r.fault.is_some()));
}

#[test]
fn statuses_are_retried_or_returned_at_once_by_class() {
    // Temporary statuses: one failure, then the object.
    for code in [408, 425, 429, 500, 502, 503, 504] {
        let server = server_with("/o", MIB);
        server.add_fault(FaultRule::new(status(code)).times(1));
        let client = client();
        let object = locate(&client, &server, "/o");
        assert_ok(&read_one(&client, &object, 0, 10), 0, 10);
        let statuses: Vec<u16> = server.requests().iter().map(|r| r.status).collect();
        assert_eq!(statuses, [code, 206], "{code}");
    }
    // Permanent statuses: one request, a stable status.
    for (code, want) in [
        (400, Status::Http),
        (401, Status::PermissionDenied),
        (403, Status::PermissionDenied),
        (404, Status::NotFound),
        (410, Status::NotFound),
        (412, Status::PreconditionFailed),
        (501, Status::Http),
    ] {
        let server = server_with("/o", MIB);
        server.add_fault(FaultRule::new(status(code)).times(1));
        let client = client();
        let object = locate(&client, &server, "/o");
        let c = read_one(&client, &object, 0, 10);
        if code == 501 {
            // 5xx are temporary by nature: retried, then the object arrives.
            assert_ok(&c, 0, 10);
            continue;
        }
        assert_failed(&c, want);
        assert_eq!(c.error().unwrap().http_status(), Some(code), "{c:?}");
        assert_eq!(server.request_count(), 1, "{code} is not retried");
    }
}

#[test]
fn retries_that_run_out_report_the_last_status_and_the_attempts() {
    let server = server_with("/o", MIB);
    server.add_fault(FaultRule::new(status(503)));
    let client = build(quick().set("retry.attempts", 4));
    let object = locate(&client, &server, "/o");
    let c = read_one(&client, &object, 0, 10);
    assert_failed(&c, Status::Http);
    let error = c.error().unwrap();
    assert_eq!(error.http_status(), Some(503));
    assert!(error.is_transient(), "{error}");
    assert_eq!(c.timing().attempts(), 4, "{error}");
    assert_eq!(
        server.request_count(),
        4,
        "{}",
        describe(&server.requests())
    );
    assert_eq!(client.transport_stats().retries, 3);
}

#[test]
fn a_retry_after_beyond_the_deadline_fails_at_once_instead_of_sleeping() {
    let server = server_with("/o", MIB);
    server.add_fault(FaultRule::new(Fault::Status {
        code: 503,
        retry_after: Some("60".into()),
    }));
    let client = build(quick().set("retry.deadline", "2s"));
    let object = locate(&client, &server, "/o");
    let batch = client.submit([Read::new(&object, 0, 10)]);
    // The completion comes before the 60 s the server asked for, let alone the test's patience.
    let c = match batch.next_timeout(PATIENCE) {
        Next::Completion(c) => c,
        other => panic!("no completion: {other:?}"),
    };
    assert_failed(&c, Status::Http);
    assert_eq!(c.error().unwrap().http_status(), Some(503), "{c:?}");
    assert_eq!(c.timing().attempts(), 1, "no second attempt: {c:?}");
    assert_eq!(
        server.request_count(),
        1,
        "{}",
        describe(&server.requests())
    );
}

#[test]
fn a_callers_condition_that_fails_on_a_resume_fails_the_read() {
    let server = server_with("/o", 4 * MIB);
    server.add_fault(FaultRule::new(Fault::CutBodyAfter(30_000)).times(1));
    server.add_fault(FaultRule::new(Fault::ChangeEtag).skip(1).times(1));
    let client = client();
    let object = locate(&client, &server, "/o");
    let c = drain(&client.submit([Read::new(&object, 1000, 300 * KIB).if_match(ETAG)]))
        .pop()
        .unwrap();
    assert_failed(&c, Status::PreconditionFailed);
    let log = server.requests();
    let last = 1000 + 300 * KIB - 1;
    assert_eq!(
        range_headers(&log),
        [format!("bytes=1000-{last}"), format!("bytes=31000-{last}")],
        "{}",
        describe(&log)
    );
    assert!(log.iter().all(|r| r.header("if-match") == Some(ETAG)));
    assert_eq!(log[1].status, 412);
}

#[test]
fn cancelling_a_batch_ends_a_read_that_waits_for_an_answer() {
    let server = server_with("/o", MIB);
    server.add_fault(FaultRule::new(Fault::NeverAnswer));
    let client = client();
    let object = locate(&client, &server, "/o");
    let batch = client.submit([Read::new(&object, 0, 10)]);
    wait_for_requests(&server, 1);
    batch.cancel();
    let c = match batch.next_timeout(PATIENCE) {
        Next::Completion(c) => c,
        other => panic!("no completion after cancel: {other:?}"),
    };
    assert_failed(&c, Status::Cancelled);
    assert_eq!(server.request_count(), 1);
}

#[test]
fn an_ignored_range_reaching_the_end_of_the_object_gives_the_valid_prefix() {
    let server = MockServer::start();
    server.insert("/o", karu_testkit::pattern(0, 1000));
    server.add_fault(FaultRule::new(Fault::IgnoreRange));
    let client = client();
    let object = locate(&client, &server, "/o");
    let done = read_all(&client, &object, &[(100, 10)]);
    assert_ok(&done[0], 100, 10);
    let c = read_one(&client, &object, 900, 200);
    http_support::assert_prefix(&c, 900, 100);
    let c = read_one(&client, &object, 2000, 10);
    http_support::assert_prefix(&c, 2000, 0);
    let log = server.requests();
    assert_eq!(log.len(), 3, "{}", describe(&log));
    assert!(log.iter().all(|r| r.status == 200));
}

#[test]
fn waiting_too_long_for_the_response_head_counts_against_the_low_speed_time() {
    let server = server_with("/o", MIB);
    server.add_fault(FaultRule::new(Fault::Latency(Duration::from_secs(3))).times(1));
    let client = build(quick().set("http.low_speed_time", "1s"));
    let object = locate(&client, &server, "/o");
    assert_ok(&read_one(&client, &object, 0, 10), 0, 10);
    let log = server.requests();
    assert_eq!(log.len(), 2, "{}", describe(&log));
    assert_eq!(log[1].fault, None);
}

#[test]
fn a_read_cut_twice_resumes_twice_and_nothing_is_fetched_twice() {
    let server = server_with("/o", 4 * MIB);
    server.add_fault(FaultRule::new(Fault::CutBodyAfter(30_000)).times(2));
    let client = client();
    let object = locate(&client, &server, "/o");
    assert_ok(
        &read_one(&client, &object, 1000, 300 * KIB),
        1000,
        300 * KIB,
    );
    let last = 1000 + 300 * KIB - 1;
    let log = server.requests();
    assert_eq!(
        range_headers(&log),
        [
            format!("bytes=1000-{last}"),
            format!("bytes=31000-{last}"),
            format!("bytes=61000-{last}"),
        ],
        "{}",
        describe(&log)
    );
    assert!(log[1..].iter().all(|r| r.header("if-match") == Some(ETAG)));
    let sent: u64 = log.iter().map(|r| r.body_bytes).sum();
    assert_eq!(sent, 300 * KIB);
}

#[test]
fn a_resume_after_an_ignored_range_starts_after_the_bytes_kept() {
    let server = server_with("/o", 4 * MIB);
    // The whole object from byte 0, cut after 50,000 bytes: 49,000 of them were wanted.
    server.add_fault(FaultRule::new(Fault::IgnoreRange).times(1));
    server.add_fault(FaultRule::new(Fault::CutBodyAfter(50_000)).times(1));
    let client = client();
    let object = locate(&client, &server, "/o");
    assert_ok(
        &read_one(&client, &object, 1000, 300 * KIB),
        1000,
        300 * KIB,
    );
    let last = 1000 + 300 * KIB - 1;
    let log = server.requests();
    assert_eq!(
        range_headers(&log),
        [format!("bytes=1000-{last}"), format!("bytes=50000-{last}")],
        "{}",
        describe(&log)
    );
    assert_eq!((log[0].status, log[1].status), (200, 206));
    assert_eq!(log[1].header("if-match"), Some(ETAG));
}

#[test]
fn a_resumed_request_answered_with_the_whole_object_still_delivers_exact_bytes() {
    let server = server_with("/o", 2 * MIB);
    server.add_fault(FaultRule::new(Fault::CutBodyAfter(30_000)).times(1));
    server.add_fault(FaultRule::new(Fault::IgnoreRange).skip(1).times(1));
    let client = client();
    let object = locate(&client, &server, "/o");
    assert_ok(
        &read_one(&client, &object, 1000, 300 * KIB),
        1000,
        300 * KIB,
    );
    let log = server.requests();
    let statuses: Vec<u16> = log.iter().map(|r| r.status).collect();
    assert_eq!(statuses, [206, 200], "{}", describe(&log));
    assert_eq!(log[1].byte_range.map(|r| r.0), Some(31_000));
}

#[test]
fn a_server_ignoring_the_saved_tag_on_a_resume_is_caught_and_the_read_restarts() {
    let server = server_with("/o", 4 * MIB);
    server.add_fault(FaultRule::new(Fault::CutBodyAfter(30_000)).times(1));
    // The object changes, and the server serves it despite the If-Match of the resume.
    server.add_fault(FaultRule::new(Fault::ChangeEtag).skip(1).times(1));
    server.add_fault(FaultRule::new(Fault::IgnoreIfMatch).skip(1).times(1));
    let client = client();
    let object = locate(&client, &server, "/o");
    assert_ok(
        &read_one(&client, &object, 1000, 300 * KIB),
        1000,
        300 * KIB,
    );
    let last = 1000 + 300 * KIB - 1;
    let log = server.requests();
    assert_eq!(
        range_headers(&log),
        [
            format!("bytes=1000-{last}"),
            format!("bytes=31000-{last}"),
            format!("bytes=1000-{last}"),
        ],
        "{}",
        describe(&log)
    );
    assert_eq!(log[1].header("if-match"), Some(ETAG));
    assert_eq!(log[1].status, 206, "the server ignored the condition");
}

#[test]
fn retry_settings_apply_by_path_rule() {
    let server = server_with("/a", MIB);
    server.insert_virtual("/b", MIB);
    server.add_fault(FaultRule::new(status(503)));
    let client = build(quick().set("retry.attempts", 4).path_set(
        &server.url("/a"),
        "retry.attempts",
        2,
    ));
    let a = read_one(&client, &locate(&client, &server, "/a"), 0, 10);
    let b = read_one(&client, &locate(&client, &server, "/b"), 0, 10);
    assert_failed(&a, Status::Http);
    assert_failed(&b, Status::Http);
    let log = server.requests();
    let count = |path: &str| log.iter().filter(|r| r.path == path).count();
    assert_eq!((count("/a"), count("/b")), (2, 4), "{}", describe(&log));
}

#[test]
fn a_thousand_read_batch_under_intermittent_faults_arrives_exact() {
    const READS: u64 = 1000;
    const STRIDE: u64 = 2 * MIB;
    let server = server_with("/o", READS * STRIDE);
    // The first 50 requests get a 503; the next 20 are cut after 100 bytes.
    server.add_fault(FaultRule::new(status(503)).times(50));
    server.add_fault(FaultRule::new(Fault::CutBodyAfter(100)).skip(50).times(20));
    let client = client();
    let object = locate(&client, &server, "/o");
    let batch = client.submit((0..READS).map(|i| Read::new(&object, i * STRIDE + i, 4096)));
    let done = drain(&batch);
    for (i, c) in done.iter().enumerate() {
        let i = i as u64;
        assert_ok(c, i * STRIDE + i, 4096);
    }
    let log = server.requests();
    assert_eq!(log.len() as u64, READS + 50 + 20);
    assert_eq!(log.iter().filter(|r| r.status == 503).count(), 50);
    // Each cut read resumed after its 100 bytes, pinned to the ETag: the object bytes sent
    // add up to exactly what was asked for.
    let resumed: Vec<_> = log
        .iter()
        .filter(|r| r.header("if-match").is_some())
        .collect();
    assert_eq!(resumed.len(), 20);
    for r in &resumed {
        // A resume may itself be cut (the rule counts requests, resumes included): it then
        // starts 100 bytes further on. It always ends at its read's last byte.
        let (first, last) = r.byte_range.unwrap();
        let read_start = (last / STRIDE) * STRIDE + last / STRIDE;
        assert_eq!(last, read_start + 4095, "{r:?}");
        let kept = first - read_start;
        assert!(kept >= 100 && kept.is_multiple_of(100), "{r:?}");
    }
    let object_bytes: u64 = log
        .iter()
        .filter(|r| r.status == 206)
        .map(|r| r.body_bytes)
        .sum();
    assert_eq!(object_bytes, READS * 4096);
}

#[test]
fn cancelling_a_batch_ends_the_wait_before_a_retry_and_a_slow_body() {
    let server = server_with("/o", MIB);
    server.add_fault(
        FaultRule::new(Fault::Status {
            code: 503,
            retry_after: Some("60".into()),
        })
        .path("/o")
        .times(1),
    );
    server.insert_virtual("/slow", MIB);
    server.add_fault(
        FaultRule::new(Fault::Trickle {
            chunk: 10,
            interval: Duration::from_millis(50),
        })
        .path("/slow"),
    );
    let client = client();
    let batch = client.submit([
        Read::new(&locate(&client, &server, "/o"), 0, 10),
        Read::new(&locate(&client, &server, "/slow"), 0, 100_000),
    ]);
    wait_for_requests(&server, 2);
    batch.cancel();
    let done = drain(&batch);
    assert_failed(&done[0], Status::Cancelled);
    assert_failed(&done[1], Status::Cancelled);
    assert_eq!(server.request_count(), 2, "no retry after the cancel");
}

/// Answers every request with a 403 whose XML error echoes a signed URL, spread over lines.
#[derive(Debug)]
struct Denied;

impl karu_testkit::Gate for Denied {
    fn check(&self, _: &karu_testkit::RequestHead) -> Option<karu_testkit::GateResponse> {
        Some(karu_testkit::GateResponse::new(
            403,
            "<Error>\n  <Code>AccessDenied</Code>\n  <Message>Request   https://h/o?X-Sig=SECRET\n\
             was denied</Message>\n  <StringToSign>SECRET2</StringToSign>\n</Error>",
        ))
    }
}

#[test]
fn error_messages_summarise_the_body_without_secrets() {
    let server = server_with("/o", MIB);
    server.set_gate(Some(std::sync::Arc::new(Denied)));
    let client = client();
    let c = read_one(&client, &locate(&client, &server, "/o"), 0, 10);
    assert_failed(&c, Status::PermissionDenied);
    let message = c.error().unwrap().message();
    assert!(
        message.contains("403") && message.contains("AccessDenied"),
        "{message}"
    );
    assert!(
        message.contains("Request https://h/o?<redacted> was denied"),
        "{message}"
    );
    assert!(!message.contains("SECRET"), "{message}");
    assert_eq!(server.request_count(), 1);
}

/// Body bytes the server sent, from its request log.
fn sent(log: &[karu_testkit::RequestRecord]) -> u64 {
    log.iter().map(|r| r.body_bytes).sum()
}

#[test]
fn fetched_bytes_are_the_bytes_received_over_every_attempt() {
    const LEN: u64 = 300 * KIB;
    // A cut read without a strong ETag starts over: 30,000 bytes, then the whole range.
    // With one, it resumes: 30,000 bytes, then the rest.
    for (etag, expected) in [(None, 30_000 + LEN), (Some(ETAG), LEN)] {
        let server = MockServer::start();
        server.insert_virtual("/o", 4 * MIB);
        server.set_etag("/o", etag);
        server.add_fault(FaultRule::new(Fault::CutBodyAfter(30_000)).times(1));
        let client = client();
        let object = locate(&client, &server, "/o");
        let batch = client.submit([Read::new(&object, 1000, LEN)]);
        let done = drain(&batch);
        assert_ok(&done[0], 1000, LEN);
        let log = server.requests();
        assert_eq!(log.len(), 2, "{}", describe(&log));
        let stats = batch.stats();
        assert_eq!(stats.planned_bytes, LEN, "{etag:?}");
        assert_eq!(stats.fetched_bytes, expected, "{etag:?}: {stats:?}");
        assert_eq!(
            stats.fetched_bytes,
            sent(&log),
            "{etag:?}: {}",
            describe(&log)
        );
        let timing = done[0].timing();
        assert_eq!(
            (timing.attempts(), timing.transfer_bytes()),
            (2, expected),
            "{etag:?}: {timing:?}"
        );
    }
}

#[test]
fn a_completion_carries_the_timings_and_counts_of_the_transfer_that_carried_it() {
    let server = server_with("/o", 64 * MIB);
    let client = client();
    let object = locate(&client, &server, "/o");
    // Two neighbours share a request; the third, 32 MiB away, has its own.
    let reads = [(0, 1000), (2000, 1000), (32 * MIB, 500)];
    let done = read_all(&client, &object, &reads);
    for (c, &(o, l)) in done.iter().zip(&reads) {
        assert_ok(c, o, l);
    }
    let log = server.requests();
    assert_eq!(log.len(), 2, "{}", describe(&log));
    let t: Vec<&karu::Timing> = done.iter().map(|c| c.timing()).collect();
    let (merged, alone) = (t[0].transfer(), t[2].transfer());
    assert!(merged.is_some() && alone.is_some(), "{t:?}");
    assert_eq!(t[1].transfer(), merged, "merged reads share their transfer");
    assert_ne!(merged, alone);
    assert_eq!(
        [
            t[0].transfer_bytes(),
            t[1].transfer_bytes(),
            t[2].transfer_bytes()
        ],
        [3000, 3000, 500]
    );
    for timing in &t {
        assert_eq!(timing.attempts(), 1, "{timing:?}");
        let first = timing.first_byte().expect("a first byte");
        assert!(first <= timing.done(), "{timing:?}");
    }
}

#[test]
fn a_failed_transfer_reports_its_attempts_and_no_first_byte() {
    let server = server_with("/o", MIB);
    server.add_fault(FaultRule::new(status(503)));
    let client = build(quick().set("retry.attempts", 3));
    let object = locate(&client, &server, "/o");
    let c = read_one(&client, &object, 0, 100);
    assert_failed(&c, Status::Http);
    let log = server.requests();
    assert_eq!(log.len(), 3, "{}", describe(&log));
    let timing = c.timing();
    assert_eq!(timing.attempts(), 3, "{timing:?}");
    assert_eq!((timing.first_byte(), timing.transfer_bytes()), (None, 0));
}

/// Serves `/o` from `/o@1` and `/o@2` in turn, request by request: an object whose content
/// and size change while its `ETag` does not.
#[derive(Debug, Default)]
struct Alternate(std::sync::atomic::AtomicU64);

impl karu_testkit::Gate for Alternate {
    fn check(&self, _: &karu_testkit::RequestHead) -> Option<karu_testkit::GateResponse> {
        None
    }

    fn object_path(&self, request: &karu_testkit::RequestHead) -> Option<String> {
        let n = self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        (request.path == "/o").then(|| format!("/o@{}", 1 + n % 2))
    }
}

#[test]
fn partial_answers_stating_two_sizes_under_one_tag_restart_the_range() {
    // Two versions under one ETag: the first answer (a 4 MiB object) is cut after 30,000
    // bytes, the resumed one (of a 3 MiB object, same tag) after 30,000 more, and the third
    // answer comes from the first version again. Its size agrees with the first answer's, so
    // resuming once more would have made an OK read of bytes from two versions.
    let server = MockServer::start();
    let v2: Vec<u8> = karu_testkit::pattern(0, 3 << 20)
        .iter()
        .map(|b| !b)
        .collect();
    server.insert("/o@1", karu_testkit::pattern(0, 4 << 20));
    server.insert("/o@2", v2);
    for path in ["/o@1", "/o@2"] {
        server.set_etag(path, Some(ETAG));
    }
    server.set_gate(Some(std::sync::Arc::new(Alternate::default())));
    server.add_fault(FaultRule::new(Fault::CutBodyAfter(30_000)).times(2));
    let client = client();
    let object = locate(&client, &server, "/o");
    let c = read_one(&client, &object, 1000, 300 * KIB);
    assert_ok(&c, 1000, 300 * KIB);
    let last = 1000 + 300 * KIB - 1;
    let log = server.requests();
    assert_eq!(
        range_headers(&log),
        [
            format!("bytes=1000-{last}"),
            format!("bytes=31000-{last}"),
            format!("bytes=1000-{last}"),
        ],
        "the second size restarts the range:\n{}",
        describe(&log)
    );
    assert_eq!(log[2].header("if-match"), None, "{}", describe(&log));
}
