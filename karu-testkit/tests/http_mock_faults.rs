//! Every fault of the plan happens on the wire, and rules count their matches.

mod support;

use std::io::Read;
use std::time::{Duration, Instant};

use karu_testkit::{Fault, FaultRule, MockServer, pattern, pattern_version, version_of_pattern};
use support::{BodyEnd, Client, request, wait_until};

fn server_with(path: &str, len: usize) -> (MockServer, Vec<u8>) {
    let server = MockServer::start();
    let data = pattern(0, len);
    server.insert(path, data.clone());
    (server, data)
}

#[test]
fn status_faults_answer_with_retry_after_then_stop() {
    let (server, data) = server_with("/a", 100);
    server.add_fault(
        FaultRule::new(Fault::Status {
            code: 503,
            retry_after: Some("1".into()),
        })
        .times(1),
    );
    server.add_fault(
        FaultRule::new(Fault::Status {
            code: 429,
            retry_after: Some("Wed, 21 Oct 2015 07:28:00 GMT".into()),
        })
        .skip(1)
        .times(1),
    );
    let mut client = Client::connect(server.addr());
    let first = client.get_range("/a", "bytes=0-9");
    assert_eq!(first.status, 503);
    assert_eq!(first.header("retry-after"), Some("1"));
    assert!(!first.body.is_empty() && first.body.len() < 200);
    let second = client.get_range("/a", "bytes=0-9");
    assert_eq!(second.status, 429);
    assert_eq!(
        second.header("retry-after"),
        Some("Wed, 21 Oct 2015 07:28:00 GMT")
    );
    let third = client.get_range("/a", "bytes=0-9");
    assert_eq!((third.status, third.body.as_slice()), (206, &data[..10]));
    let log = server.requests();
    assert_eq!(
        log.iter().map(|r| r.status).collect::<Vec<_>>(),
        [503, 429, 206]
    );
    assert!(
        log[0]
            .fault
            .as_deref()
            .unwrap()
            .contains("Status { code: 503")
    );
    assert!(log[1].fault.as_deref().unwrap().contains("code: 429"));
    assert_eq!(log[2].fault, None);
    assert_eq!(
        log[0].connection, log[2].connection,
        "error responses keep the connection"
    );
}

#[test]
fn skip_times_path_and_method_select_requests() {
    let (server, _) = server_with("/a", 10);
    server.insert("/b", vec![0u8; 10]);
    server.add_fault(
        FaultRule::new(Fault::Status {
            code: 500,
            retry_after: None,
        })
        .path("/a")
        .method("GET")
        .skip(1)
        .times(2),
    );
    let mut client = Client::connect(server.addr());
    let mut statuses = Vec::new();
    for path in ["/a", "/b", "/a", "/b", "/a", "/a", "/a"] {
        statuses.push(client.get(path).status);
    }
    // HEAD does not match the rule, so it does not consume it either.
    assert_eq!(client.request("HEAD", "/a", &[]).unwrap().status, 200);
    assert_eq!(statuses, [200, 200, 500, 200, 500, 200, 200]);
    server.clear_faults();
    server.add_fault(FaultRule::new(Fault::Status {
        code: 502,
        retry_after: None,
    }));
    assert_eq!(client.get("/b").status, 502);
    assert_eq!(client.get("/a").status, 502, "forever by default");
    server.clear_faults();
    assert_eq!(client.get("/a").status, 200);
}

#[test]
fn several_rules_apply_to_one_request() {
    let (server, _) = server_with("/a", 10);
    server.add_fault(FaultRule::new(Fault::Latency(Duration::from_millis(120))).times(1));
    server.add_fault(
        FaultRule::new(Fault::Status {
            code: 500,
            retry_after: None,
        })
        .times(1),
    );
    let started = Instant::now();
    let r = request(server.addr(), "GET", "/a", &[]);
    assert!(started.elapsed() >= Duration::from_millis(120));
    assert_eq!(r.status, 500);
    let record = &server.requests()[0];
    let fault = record.fault.clone().unwrap();
    assert!(fault.starts_with("Latency(120ms) + Status {"), "{fault}");
    assert_eq!(record.latency, Duration::from_millis(120));
}

#[test]
fn latency_fault_delays_the_headers() {
    let (server, _) = server_with("/a", 10);
    server.add_fault(FaultRule::new(Fault::Latency(Duration::from_millis(150))).path("/a"));
    let mut client = Client::connect(server.addr());
    let started = Instant::now();
    assert_eq!(client.get("/a").status, 200);
    assert!(started.elapsed() >= Duration::from_millis(150));
    assert_eq!(client.get("/other").status, 404);
    let log: Vec<_> = server
        .requests()
        .iter()
        .map(|r| (r.path.clone(), r.fault.clone(), r.latency))
        .collect();
    assert_eq!(
        log,
        [
            (
                "/a".into(),
                Some("Latency(150ms)".into()),
                Duration::from_millis(150)
            ),
            ("/other".into(), None, Duration::ZERO),
        ]
    );
}

#[test]
fn ignore_range_sends_the_whole_body_with_200() {
    let (server, data) = server_with("/a", 500);
    server.add_fault(FaultRule::new(Fault::IgnoreRange).times(1));
    let mut client = Client::connect(server.addr());
    let r = client.get_range("/a", "bytes=10-19");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-range"), None);
    assert_eq!(r.body, data);
    assert_eq!(client.get_range("/a", "bytes=10-19").status, 206);
    assert_eq!(server.requests()[0].fault.as_deref(), Some("IgnoreRange"));
}

#[test]
fn wrong_and_missing_content_range() {
    let (server, data) = server_with("/a", 1000);
    server.add_fault(FaultRule::new(Fault::WrongContentRange { shift: 5 }).times(1));
    server.add_fault(
        FaultRule::new(Fault::WrongContentRange { shift: -50 })
            .skip(1)
            .times(1),
    );
    server.add_fault(FaultRule::new(Fault::MissingContentRange).skip(2).times(1));
    let mut client = Client::connect(server.addr());
    let shifted = client.get_range("/a", "bytes=10-19");
    assert_eq!(shifted.status, 206);
    assert_eq!(shifted.header("content-range"), Some("bytes 15-24/1000"));
    assert_eq!(
        shifted.body,
        &data[10..20],
        "the body is the real requested bytes"
    );
    let clamped = client.get_range("/a", "bytes=10-19");
    assert_eq!(clamped.header("content-range"), Some("bytes 0-0/1000"));
    let missing = client.get_range("/a", "bytes=10-19");
    assert_eq!(missing.status, 206);
    assert_eq!(missing.header("content-range"), None);
    assert_eq!(missing.body, &data[10..20]);
}

#[test]
fn ok_with_content_range_sends_only_the_range_with_200() {
    let (server, data) = server_with("/a", 1000);
    server.add_fault(FaultRule::new(Fault::OkWithContentRange).times(1));
    server.add_fault(FaultRule::new(Fault::OkWithContentRange).skip(1).times(1));
    server.add_fault(
        FaultRule::new(Fault::WrongContentRange { shift: 3 })
            .skip(1)
            .times(1),
    );
    let mut client = Client::connect(server.addr());
    let r = client.get_range("/a", "bytes=5-19");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-range"), Some("bytes 5-19/1000"));
    assert_eq!(
        (r.content_length(), r.body.as_slice()),
        (Some(15), &data[5..20])
    );
    let shifted = client.get_range("/a", "bytes=5-19");
    assert_eq!(shifted.status, 200);
    assert_eq!(shifted.header("content-range"), Some("bytes 8-22/1000"));
    assert_eq!(shifted.body, &data[5..20]);
    // A request without a range is unaffected (a whole 200, no Content-Range).
    server.add_fault(FaultRule::new(Fault::OkWithContentRange).times(1));
    let whole = client.get("/a");
    assert_eq!((whole.status, whole.header("content-range")), (200, None));
    assert_eq!(client.get_range("/a", "bytes=0-0").status, 206);
    assert_eq!(
        server.requests()[0].fault.as_deref(),
        Some("OkWithContentRange")
    );
}

#[test]
fn close_delimited_bodies_have_no_length_and_end_with_the_connection() {
    let (server, data) = server_with("/a", 1000);
    server.add_fault(FaultRule::new(Fault::CloseDelimited).times(1));
    server.add_fault(FaultRule::new(Fault::CloseDelimited).skip(1).times(1));
    server.add_fault(FaultRule::new(Fault::CutBodyAfter(300)).skip(1).times(1));
    // Complete: every byte, then EOF; no length and no chunked framing announced.
    let mut client = Client::connect(server.addr());
    client
        .send("GET", "/a", &[("Range", "bytes=100-899")])
        .unwrap();
    let (status, headers) = client.read_head().unwrap();
    let header = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    };
    assert_eq!(status, 206);
    assert_eq!(header("content-length"), None);
    assert_eq!(header("transfer-encoding"), None);
    assert_eq!(
        header("content-range").as_deref(),
        Some("bytes 100-899/1000")
    );
    let (body, end) = client.read_to_end();
    assert_eq!((body.as_slice(), end), (&data[100..900], BodyEnd::Eof));
    // Cut: 300 bytes, then the same clean EOF.
    let mut client = Client::connect(server.addr());
    client.send("GET", "/a", &[]).unwrap();
    let (status, headers) = client.read_head().unwrap();
    assert_eq!(status, 200);
    assert!(!headers.iter().any(|(n, _)| n == "content-length"));
    let (body, end) = client.read_to_end();
    assert_eq!((body.as_slice(), end), (&data[..300], BodyEnd::Eof));
    let log = server.requests();
    assert_eq!(
        (log[0].body_bytes, log[1].body_bytes),
        (800, 300),
        "{log:?}"
    );
}

#[test]
fn content_range_faults_apply_to_416_answers_too() {
    let (server, _) = server_with("/a", 100);
    server.add_fault(FaultRule::new(Fault::WrongContentRange { shift: 900 }).times(1));
    server.add_fault(FaultRule::new(Fault::MissingContentRange).skip(1).times(1));
    let mut client = Client::connect(server.addr());
    let moved = client.get_range("/a", "bytes=500-599");
    assert_eq!(moved.status, 416);
    assert_eq!(moved.header("content-range"), Some("bytes */1000"));
    let text = String::from_utf8(moved.body).unwrap();
    assert!(
        text.contains("<ActualObjectSize>1000</ActualObjectSize>"),
        "{text}"
    );
    let missing = client.get_range("/a", "bytes=500-599");
    assert_eq!(
        (missing.status, missing.header("content-range")),
        (416, None)
    );
    let text = String::from_utf8(missing.body).unwrap();
    assert!(
        text.contains(
            "<RangeRequested>bytes=500-599</RangeRequested><ActualObjectSize>100</ActualObjectSize>"
        ),
        "{text}"
    );
}

/// Two requests through `server`'s barrier rules on `/a` (ETag `"v1"`, a `ChangeEtag` on the
/// second): the first for bytes 0-9, the second for bytes 10-19 once `first_held` says the
/// server holds the first. Checks that both got their bytes, the first from the object as it
/// was and the second from the changed one, and that both were in flight together (the
/// round's last arrival counts before anyone is let go); returns the log's faults.
fn first_reads_before_the_change(
    server: &MockServer,
    data: &[u8],
    first_held: impl FnMut() -> bool,
) -> Vec<Option<String>> {
    let mut first = Client::connect(server.addr());
    first.send("GET", "/a", &[("Range", "bytes=0-9")]).unwrap();
    wait_until("the server holding the first request", first_held);
    let mut second = Client::connect(server.addr());
    second
        .send("GET", "/a", &[("Range", "bytes=10-19")])
        .unwrap();
    let one = first.read_response(false).unwrap();
    let two = second.read_response(false).unwrap();
    assert_eq!((one.status, one.body.as_slice()), (206, &data[..10]));
    assert_eq!((two.status, two.body.as_slice()), (206, &data[10..20]));
    assert_eq!(one.header("etag"), Some("\"v1\""));
    assert_ne!(two.header("etag").unwrap(), "\"v1\"");
    assert_eq!(server.max_in_flight(), 2);
    server.requests().into_iter().map(|r| r.fault).collect()
}

#[test]
fn a_barrier_holds_requests_until_the_round_is_complete_then_answers_in_arrival_order() {
    let (server, data) = server_with("/a", 100);
    server.set_etag("/a", Some("\"v1\""));
    server.add_fault(FaultRule::new(Fault::Barrier(2)).times(2));
    server.add_fault(FaultRule::new(Fault::ChangeEtag).skip(1).times(1));
    // The second request goes out once the first is held at the barrier.
    let faults = first_reads_before_the_change(&server, &data, || server.request_count() == 1);
    assert_eq!(
        faults,
        [
            Some("Barrier(2)".into()),
            Some("Barrier(2) + ChangeEtag".into())
        ]
    );
}

#[test]
fn barrier_turns_follow_the_order_the_faults_were_chosen_in_not_the_order_requests_reach_it() {
    let (server, data) = server_with("/a", 100);
    server.set_etag("/a", Some("\"v1\""));
    // The first request waits out 300 ms of latency before it reaches the barrier; the
    // second, with the fault that changes the object, gets there at once. Its turn still
    // comes second: the first reads the object as it was.
    server.add_fault(FaultRule::new(Fault::Latency(Duration::from_millis(300))).times(1));
    server.add_fault(FaultRule::new(Fault::Barrier(2)).times(2));
    server.add_fault(FaultRule::new(Fault::ChangeEtag).skip(1).times(1));
    let faults = first_reads_before_the_change(&server, &data, || server.in_latency() == 1);
    assert_eq!(
        faults,
        [
            Some("Latency(300ms) + Barrier(2)".into()),
            Some("Barrier(2) + ChangeEtag".into())
        ]
    );
}

#[test]
fn cut_body_sends_fewer_bytes_than_content_length_then_eof() {
    let server = MockServer::start();
    server.insert_virtual("/v", 10 << 20);
    server.add_fault(FaultRule::new(Fault::CutBodyAfter(1000)).times(1));
    let mut client = Client::connect(server.addr());
    let r = client.get_range("/v", "bytes=0-999999");
    assert_eq!(r.status, 206);
    assert_eq!(r.content_length(), Some(1_000_000));
    assert_eq!(r.header("content-range"), Some("bytes 0-999999/10485760"));
    assert_eq!(r.end, BodyEnd::Eof);
    assert_eq!(r.received, 1000);
    assert_eq!(r.body, pattern(0, 1000));
    let log = server.requests();
    assert_eq!((log[0].status, log[0].body_bytes), (206, 1000));
    assert_eq!(log[0].fault.as_deref(), Some("CutBodyAfter(1000)"));
    // A big cut is delivered whole too (the bytes are flushed before the FIN).
    server.add_fault(FaultRule::new(Fault::CutBodyAfter(3 << 20)).times(1));
    let r = Client::connect(server.addr()).get("/v");
    assert_eq!((r.end, r.received), (BodyEnd::Eof, 3 << 20));
    assert_eq!(r.body, pattern(0, 3 << 20));
    // Cut at zero: headers only.
    server.add_fault(FaultRule::new(Fault::CutBodyAfter(0)).times(1));
    let r = Client::connect(server.addr()).get_range("/v", "bytes=0-9");
    assert_eq!((r.status, r.end, r.received), (206, BodyEnd::Eof, 0));
}

#[test]
fn reset_shows_as_connection_reset_on_the_client() {
    let server = MockServer::start();
    server.insert_virtual("/v", 1 << 20);
    server.add_fault(FaultRule::new(Fault::ResetAfter(1000)).times(1));
    let mut client = Client::connect(server.addr());
    let r = client.get("/v");
    assert_eq!(r.status, 200);
    assert_eq!(r.content_length(), Some(1 << 20));
    assert_eq!(r.end, BodyEnd::Error(std::io::ErrorKind::ConnectionReset));
    // The bytes before the reset arrive: the server flushes them and waits a moment first.
    assert_eq!(r.received, 1000);
    assert_eq!(r.body, pattern(0, 1000));
    let log = server.requests();
    assert_eq!(log[0].body_bytes, 1000);
    assert_eq!(log[0].fault.as_deref(), Some("ResetAfter(1000)"));
    // The next connection is served normally.
    assert_eq!(
        Client::connect(server.addr()).get("/v").end,
        BodyEnd::Complete
    );
}

#[test]
fn trickle_paces_the_body() {
    let (server, data) = server_with("/a", 500);
    server.add_fault(
        FaultRule::new(Fault::Trickle {
            chunk: 100,
            interval: Duration::from_millis(40),
        })
        .times(1),
    );
    let mut client = Client::connect(server.addr());
    // From before the request leaves: the server's pauses all come after it arrives, so the
    // elapsed time covers them however the threads are scheduled (taken after `send`, it
    // would miss the time the server was already pacing on a loaded machine).
    let started = Instant::now();
    client.send("GET", "/a", &[]).unwrap();
    let mut arrivals = Vec::new();
    let r = client
        .read_response_with(false, &mut |chunk| {
            arrivals.push((started.elapsed(), chunk.len()))
        })
        .unwrap();
    let elapsed = started.elapsed();
    assert_eq!((r.status, r.received), (200, 500));
    // Five chunks, four pauses of 40 ms.
    assert!(elapsed >= Duration::from_millis(160), "{elapsed:?}");
    assert!(arrivals.len() >= 4, "{arrivals:?}");
    assert!(arrivals.iter().all(|(_, n)| *n <= 100), "{arrivals:?}");
    let r = client.get("/a");
    assert_eq!(r.body, data);
}

#[test]
fn gzip_body_decompresses_to_the_range() {
    let server = MockServer::start();
    server.insert_virtual("/v", 1 << 20);
    let data = pattern(0, 1 << 20);
    server.insert("/text", b"hello hello hello hello hello hello".repeat(100));
    server.add_fault(FaultRule::new(Fault::Gzip));
    let mut client = Client::connect(server.addr());
    let r = client.get_range("/v", "bytes=1000-200999");
    assert_eq!(r.status, 206);
    assert_eq!(r.header("content-encoding"), Some("gzip"));
    assert_eq!(r.header("content-range"), Some("bytes 1000-200999/1048576"));
    assert_eq!(r.content_length(), Some(r.body.len() as u64));
    let mut plain = Vec::new();
    flate2::read::GzDecoder::new(r.body.as_slice())
        .read_to_end(&mut plain)
        .unwrap();
    assert_eq!(plain, &data[1000..201_000]);
    let text = client.get("/text");
    assert!(text.body.len() < 3500, "compressible text shrinks");
    let mut plain = Vec::new();
    flate2::read::GzDecoder::new(text.body.as_slice())
        .read_to_end(&mut plain)
        .unwrap();
    assert_eq!(plain, b"hello hello hello hello hello hello".repeat(100));
}

#[test]
fn change_etag_gives_a_new_etag_before_answering() {
    let (server, _) = server_with("/a", 100);
    let mut client = Client::connect(server.addr());
    let e1 = client.get("/a").header("etag").unwrap().to_owned();
    server.add_fault(FaultRule::new(Fault::ChangeEtag).times(1));
    let changed = client
        .request("GET", "/a", &[("Range", "bytes=0-9"), ("If-Match", &e1)])
        .unwrap();
    assert_eq!(
        changed.status, 412,
        "the object changed before this request was answered"
    );
    let e2 = client.get("/a").header("etag").unwrap().to_owned();
    assert_ne!(e1, e2);
    let ok = client
        .request("GET", "/a", &[("Range", "bytes=0-9"), ("If-Match", &e2)])
        .unwrap();
    assert_eq!(ok.status, 206);
    assert_eq!(ok.header("etag"), Some(e2.as_str()));
}

#[test]
fn ignore_if_match_serves_a_changed_object() {
    let (server, data) = server_with("/a", 100);
    server.add_fault(FaultRule::new(Fault::IgnoreIfMatch).times(1));
    let mut client = Client::connect(server.addr());
    let r = client
        .request(
            "GET",
            "/a",
            &[("Range", "bytes=0-9"), ("If-Match", "\"stale\"")],
        )
        .unwrap();
    assert_eq!((r.status, r.body.as_slice()), (206, &data[..10]));
    let r = client
        .request(
            "GET",
            "/a",
            &[("Range", "bytes=0-9"), ("If-Match", "\"stale\"")],
        )
        .unwrap();
    assert_eq!(r.status, 412);
}

#[test]
fn oversized_error_body() {
    let (server, _) = server_with("/a", 100);
    server.add_fault(FaultRule::new(Fault::OversizedErrorBody {
        code: 500,
        size: 3 << 20,
    }));
    let r = request(server.addr(), "GET", "/a", &[("Range", "bytes=0-9")]);
    assert_eq!(r.status, 500);
    assert_eq!(r.content_length(), Some(3 << 20));
    assert_eq!((r.received, r.end), (3 << 20, BodyEnd::Complete));
    assert!(r.body.starts_with(b"<Error>"));
    assert_eq!(server.requests()[0].body_bytes, 3 << 20);
}

#[test]
fn never_answer_times_out_on_the_client_and_drop_still_returns() {
    let (server, _) = server_with("/a", 100);
    server.add_fault(FaultRule::new(Fault::NeverAnswer).times(1));
    let mut client = Client::connect(server.addr());
    client.set_read_timeout(Some(Duration::from_millis(300)));
    let started = Instant::now();
    let err = client.request("GET", "/a", &[]).unwrap_err();
    assert!(
        matches!(
            err.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
        "{err:?}"
    );
    assert!(started.elapsed() >= Duration::from_millis(300));
    // Other connections are served meanwhile.
    assert_eq!(request(server.addr(), "GET", "/a", &[]).status, 200);
    let log = server.requests();
    assert_eq!(
        (log[0].status, log[0].fault.as_deref()),
        (0, Some("NeverAnswer"))
    );
    drop(server);
    // The unanswered connection was closed by the shutdown.
    client.set_read_timeout(Some(Duration::from_secs(5)));
    let (rest, end) = client.read_to_end();
    assert!(rest.is_empty());
    assert!(
        matches!(
            end,
            BodyEnd::Eof | BodyEnd::Error(std::io::ErrorKind::ConnectionReset)
        ),
        "{end:?}"
    );
}

#[test]
fn a_request_limit_ends_each_connection_after_its_last_answer() {
    let (server, data) = server_with("/a", 100);
    server.set_requests_per_connection(Some(2));
    let mut client = Client::connect(server.addr());
    let first = client.get_range("/a", "bytes=0-9");
    assert_eq!((first.status, first.body.as_slice()), (206, &data[..10]));
    assert_eq!(first.header("connection"), None);
    // The second answer is the connection's last: it says so, then the server closes.
    let second = client.get_range("/a", "bytes=10-19");
    assert_eq!(
        (second.status, second.body.as_slice()),
        (206, &data[10..20])
    );
    assert_eq!(second.header("connection"), Some("close"));
    assert_eq!(client.read_to_end(), (Vec::new(), BodyEnd::Eof));
    // A new connection gets its own two requests; with no limit, connections stay open.
    let mut client = Client::connect(server.addr());
    assert_eq!(
        client.get_range("/a", "bytes=0-0").header("connection"),
        None
    );
    server.set_requests_per_connection(None);
    for _ in 0..3 {
        assert_eq!(client.get_range("/a", "bytes=0-0").status, 206);
    }
    assert_eq!(server.connections_accepted(), 2);
}

#[test]
fn silenced_connections_are_accepted_read_and_never_answered() {
    let (server, data) = server_with("/a", 100);
    server.silence_connections(u64::MAX);
    let mut silent = Vec::new();
    for _ in 0..3 {
        let mut client = Client::connect(server.addr());
        client.set_read_timeout(Some(Duration::from_millis(100)));
        let err = client.request("GET", "/a", &[]).unwrap_err();
        assert!(
            matches!(
                err.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ),
            "{err:?}"
        );
        silent.push(client);
    }
    assert_eq!(
        (server.connections_accepted(), server.request_count()),
        (3, 0)
    );
    // Back to normal: the next connection is served.
    server.silence_connections(0);
    let answer = request(server.addr(), "GET", "/a", &[]);
    assert_eq!((answer.status, answer.body.as_slice()), (200, &data[..]));
    assert_eq!(
        (server.connections_accepted(), server.request_count()),
        (4, 1)
    );
    // Dropping the server closes the silent connections.
    drop(server);
    for mut client in silent {
        client.set_read_timeout(Some(Duration::from_secs(5)));
        let (rest, end) = client.read_to_end();
        assert!(rest.is_empty());
        assert!(
            matches!(
                end,
                BodyEnd::Eof | BodyEnd::Error(std::io::ErrorKind::ConnectionReset)
            ),
            "{end:?}"
        );
    }
}

#[test]
fn a_share_of_requests_waits_and_the_log_says_which() {
    let (server, data) = server_with("/a", 100);
    server.add_fault(
        FaultRule::new(Fault::Latency(Duration::from_millis(5)))
            .share(0.25)
            .seed(11),
    );
    let mut client = Client::connect(server.addr());
    for _ in 0..200 {
        let r = client.get_range("/a", "bytes=0-9");
        assert_eq!((r.status, r.body.as_slice()), (206, &data[..10]));
    }
    let log = server.requests();
    let delayed: Vec<_> = log.iter().filter(|r| r.fault.is_some()).collect();
    // A quarter of 200 is 50 (standard deviation about 6).
    assert!((25..75).contains(&delayed.len()), "{}", delayed.len());
    for r in &log {
        let slowed = r.fault.as_deref() == Some("Latency(5ms)");
        assert_eq!(slowed, r.fault.is_some(), "{r}");
        let expected = if slowed {
            Duration::from_millis(5)
        } else {
            Duration::ZERO
        };
        assert_eq!(r.latency, expected, "{r}");
    }
}

#[test]
fn a_pareto_tail_logs_each_requests_own_delay() {
    let (server, data) = server_with("/a", 100);
    server.add_fault(
        FaultRule::new(Fault::ParetoLatency {
            median: Duration::from_millis(1),
            p99: Duration::from_millis(4),
        })
        .seed(5),
    );
    let mut client = Client::connect(server.addr());
    for _ in 0..50 {
        let r = client.get_range("/a", "bytes=10-19");
        assert_eq!((r.status, r.body.as_slice()), (206, &data[10..20]));
    }
    let log = server.requests();
    let mut delays: Vec<Duration> = log.iter().map(|r| r.latency).collect();
    for r in &log {
        assert_eq!(
            r.fault.as_deref(),
            Some(format!("Latency({:?})", r.latency).as_str()),
            "the drawn delay is the one logged and the one waited: {r}"
        );
        assert!(r.latency > Duration::ZERO && r.latency <= Duration::from_millis(40));
    }
    delays.sort();
    delays.dedup();
    assert!(delays.len() > 40, "each request draws its own delay");
}

#[test]
fn change_content_gives_the_object_new_bytes_at_every_offset_and_a_new_etag() {
    for virtual_object in [false, true] {
        let server = MockServer::start();
        if virtual_object {
            server.insert_virtual("/a", 100);
        } else {
            server.insert("/a", pattern(0, 100));
        }
        server.add_fault(FaultRule::new(Fault::ChangeContent).skip(1).times(1));
        let mut client = Client::connect(server.addr());
        let first = client.get_range("/a", "bytes=10-19");
        let second = client.get_range("/a", "bytes=10-19");
        let third = client.get_range("/a", "bytes=10-19");
        assert_eq!(first.body, pattern(10, 10));
        assert_eq!(second.body, pattern_version(1, 10, 10));
        assert_eq!(
            third.body,
            pattern_version(1, 10, 10),
            "the new version stays"
        );
        assert_ne!(first.header("etag"), second.header("etag"));
        assert_eq!(second.header("etag"), third.header("etag"));
    }
}

#[test]
fn change_content_on_every_request_keeps_the_kind_of_etag_and_gives_each_answer_its_version() {
    for etag in [None, Some("W/\"same\""), Some("\"strong\"")] {
        let server = MockServer::start();
        server.insert("/a", pattern(0, 100));
        server.set_etag("/a", etag);
        server.add_fault(FaultRule::new(Fault::ChangeContent).path("/a"));
        let mut client = Client::connect(server.addr());
        let mut tags = Vec::new();
        for version in 1..=3 {
            let answer = client.get_range("/a", "bytes=10-19");
            assert_eq!(
                version_of_pattern(&answer.body, 10),
                Some(version),
                "{etag:?}"
            );
            tags.push(answer.header("etag").map(str::to_string));
        }
        match etag {
            None => assert_eq!(tags, [None, None, None]),
            Some(weak) if weak.starts_with("W/") => {
                assert!(tags.iter().all(|t| t.as_deref() == Some(weak)), "{tags:?}");
            }
            Some(strong) => {
                assert!(
                    tags.iter().all(|t| t.as_deref() != Some(strong)),
                    "{tags:?}"
                );
                assert!(tags[0] != tags[1] && tags[1] != tags[2], "{tags:?}");
            }
        }
    }
}
