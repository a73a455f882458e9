//! Hedged requests (`[hedge]`) against the mock: a request still waiting for its answer gets
//! a duplicate, on another connection; the first answer whose head passes the checks is
//! received and the other cancelled before a byte of it lands; duplicates stay within the
//! budget, are never sent to a throttling endpoint, and another version in a duplicate's
//! answer fails the read as it would in any answer.
//!
//! The duplicates are due after a fixed `hedge.after`: the waits below are Karu's own timers,
//! and the tests arrange who answers when with faults (a request that is never answered, a
//! barrier that holds the original until its duplicate arrives), never with sleeps.

#[path = "support/http.rs"]
mod http_support;

use std::time::Duration;

use http_support::{
    KIB, MIB, assert_failed, assert_ok, build, describe, drain, locate, quick, read_one,
    sorted_ranges,
};
use karu::{BatchOptions, ClientBuilder, Evidence, Read, Rejection, Status};
use karu_testkit::{Fault, FaultRule, MockServer, pattern};

/// A client whose requests are hedged after `after`, with a budget of `budget`.
fn hedging(after: &str, budget: &str) -> ClientBuilder {
    quick()
        .set("hedge.enabled", true)
        .set("hedge.after", after)
        .set("hedge.budget", budget)
}

/// The range of the request the server never answered ([`Fault::NeverAnswer`]).
fn never_answered(log: &[karu_testkit::RequestRecord]) -> Option<(u64, u64)> {
    log.iter()
        .find(|r| {
            r.fault
                .as_deref()
                .is_some_and(|f| f.contains("NeverAnswer"))
        })
        .and_then(|r| r.byte_range)
}

fn server() -> MockServer {
    let server = MockServer::start();
    server.insert_virtual("/o", 64 * MIB);
    server
}

#[test]
fn a_request_that_is_never_answered_is_hedged_and_its_duplicate_delivers_the_bytes() {
    let server = server();
    // The first request is never answered.
    server.add_fault(FaultRule::new(Fault::NeverAnswer).times(1));
    let client = build(hedging("300ms", "100%"));
    let object = locate(&client, &server, "/o");
    let c = read_one(&client, &object, 5 * MIB, 64 * KIB);
    assert_ok(&c, 5 * MIB, 64 * KIB);
    let log = server.requests();
    // One duplicate of the same range, on another connection; it was answered, the original
    // never.
    assert_eq!(
        sorted_ranges(&log),
        [(5 * MIB, 5 * MIB + 64 * KIB - 1); 2],
        "{}",
        describe(&log)
    );
    assert_eq!((log[0].status, log[1].status), (0, 206));
    assert_ne!(log[0].connection, log[1].connection);
    let stats = client.transport_stats();
    assert_eq!((stats.requests, stats.hedges, stats.hedges_won), (2, 1, 1));
    // The read's own figures: one attempt, the bytes of one answer.
    assert_eq!(c.timing().attempts(), 1);
    assert_eq!(c.timing().transfer_bytes(), 64 * KIB);
}

#[test]
fn a_request_that_may_be_hedged_still_gives_up_waiting_for_its_head_in_time() {
    let server = server();
    // The original and its duplicate are never answered. The original's wait for its head
    // has no timer of its own before its duplicate is due (the hedging timer polls it then):
    // from then on it must, and it gives up after the low-speed time, as its duplicate does.
    server.add_fault(FaultRule::new(Fault::NeverAnswer).times(2));
    let client = build(hedging("100ms", "100%").set("http.low_speed_time", "1s"));
    let object = locate(&client, &server, "/o");
    let c = read_one(&client, &object, 3 * MIB, 4 * KIB);
    assert_ok(&c, 3 * MIB, 4 * KIB);
    let log = server.requests();
    assert_eq!(
        sorted_ranges(&log),
        [(3 * MIB, 3 * MIB + 4 * KIB - 1); 3],
        "{}",
        describe(&log)
    );
    assert_eq!(
        log.iter().map(|r| r.status).collect::<Vec<_>>(),
        [0, 0, 206],
        "{}",
        describe(&log)
    );
    let stats = client.transport_stats();
    assert_eq!((stats.requests, stats.hedges, stats.hedges_won), (3, 1, 0));
    // Both requests of the first attempt gave up; the second attempt was answered.
    assert_eq!(c.timing().attempts(), 2);
}

#[test]
fn a_batch_with_one_slowed_request_delivers_every_read_with_one_duplicate() {
    let server = server();
    let reads: Vec<(u64, u64)> = (0..8).map(|i| (i * 4 * MIB + 17, 4 * KIB)).collect();
    // Whichever request arrives third is never answered.
    server.add_fault(FaultRule::new(Fault::NeverAnswer).skip(2).times(1));
    let client = build(hedging("300ms", "100%"));
    let object = locate(&client, &server, "/o");
    let batch = client.submit_with(
        reads.iter().map(|&(o, l)| Read::new(&object, o, l)),
        &BatchOptions::new().max_gap(0),
    );
    let done = drain(&batch);
    for (c, &(o, l)) in done.iter().zip(&reads) {
        assert_ok(c, o, l);
    }
    let log = server.requests();
    assert_eq!(log.len(), reads.len() + 1, "{}", describe(&log));
    // The log is in arrival order, the faults in the order they were chosen: the two may
    // differ for requests arriving together, so the slowed one is found by its fault.
    let slowed = never_answered(&log).expect("a closed range");
    let twice: Vec<_> = log
        .iter()
        .filter(|r| r.byte_range == Some(slowed))
        .map(|r| r.status)
        .collect();
    assert_eq!(twice, [0, 206], "{}", describe(&log));
    let stats = client.transport_stats();
    assert_eq!((stats.hedges, stats.hedges_won), (1, 1));
    // The batch counts the duplicate of its request too.
    assert_eq!(batch.stats().hedges, 1);
}

#[test]
fn a_slowed_server_gets_no_more_duplicates_than_the_budget() {
    // Every request waits 60 ms for its answer and is due a duplicate after 5 ms: only the
    // budget, 5 % of the ordinary requests, holds the duplicates back.
    let server = server();
    server.add_fault(FaultRule::new(Fault::Latency(Duration::from_millis(60))));
    let client = build(
        hedging("5ms", "5%")
            .set("concurrency", 16)
            .set("io_threads", 1),
    );
    let object = locate(&client, &server, "/o");
    let reads: Vec<(u64, u64)> = (0..200).map(|i| (i * 256 * KIB, 4 * KIB)).collect();
    let batch = client.submit_with(
        reads.iter().map(|&(o, l)| Read::new(&object, o, l)),
        &BatchOptions::new().max_gap(0),
    );
    for (c, &(o, l)) in drain(&batch).iter().zip(&reads) {
        assert_ok(c, o, l);
    }
    let log = server.requests();
    let stats = client.transport_stats();
    // Every duplicate the server saw was one Karu sent (one started just as its original was
    // answered may be cancelled before it reaches the server).
    let duplicates = (log.len() - reads.len()) as u64;
    assert!(duplicates <= stats.hedges, "{}", describe(&log));
    assert_eq!(stats.retries, 0);
    assert_eq!(
        batch.stats().hedges,
        stats.hedges,
        "the batch's duplicates are the client's"
    );
    // 200 ordinary requests at 5 %: at most 10 duplicates, and the budget was used.
    assert!(
        (1..=10).contains(&stats.hedges),
        "{} duplicates",
        stats.hedges
    );
}

#[test]
fn a_duplicate_refused_for_want_of_a_token_is_sent_once_ordinary_requests_refill_the_budget() {
    // The slowed read's request is never answered; its duplicate is due after 50 ms, when the
    // budget (5 %: a token per 20 ordinary requests, from an empty bucket) has none, because
    // the reads that refill it go one after another, each answered after at least 5 ms. A
    // refused duplicate must be asked for again while its request waits: once the 20th
    // ordinary request is sent, it goes out and delivers the bytes.
    let server = server();
    server.insert_virtual("/slowed", MIB);
    server.add_fault(FaultRule::new(Fault::NeverAnswer).path("/slowed").times(1));
    server.add_fault(FaultRule::new(Fault::Latency(Duration::from_millis(5))).path("/o"));
    let client = build(hedging("50ms", "5%"));
    let slowed = locate(&client, &server, "/slowed");
    let object = locate(&client, &server, "/o");
    let waiting = client.submit([Read::new(&slowed, 1000, 4 * KIB)]);
    for i in 0..60 {
        let offset = i * MIB + 7;
        assert_ok(
            &read_one(&client, &object, offset, 4 * KIB),
            offset,
            4 * KIB,
        );
    }
    let c = drain(&waiting).pop().expect("one completion");
    assert_ok(&c, 1000, 4 * KIB);
    let log = server.requests();
    let twice: Vec<_> = log
        .iter()
        .filter(|r| r.path == "/slowed")
        .map(|r| r.status)
        .collect();
    assert_eq!(twice, [0, 206], "{}", describe(&log));
    let stats = client.transport_stats();
    assert!(stats.hedges_won >= 1, "{stats:?}");
    // Within the budget: 61 ordinary requests at 5 % are three tokens.
    assert!(stats.hedges <= 3, "{stats:?}");
}

#[test]
fn a_throttling_endpoint_gets_no_duplicates() {
    let run = |throttle: bool| {
        let server = server();
        // A first read of another object of the endpoint, never hedged (a duplicate that won
        // before the 503 arrived would leave the window as it was).
        server.insert_virtual("/first", MIB);
        if throttle {
            // One `503 SlowDown`: the endpoint's window is cut (from 32 to 16), and it is
            // throttling until 16 answers have come without another: longer than the eight
            // reads below take, all in flight at once.
            server.add_fault(
                FaultRule::new(Fault::Status {
                    code: 503,
                    retry_after: None,
                })
                .path("/first")
                .times(1),
            );
        }
        let client = build(hedging("5ms", "100%").set("concurrency", 32).path_set(
            &server.url("/first"),
            "hedge.enabled",
            false,
        ));
        let first = locate(&client, &server, "/first");
        assert_ok(&read_one(&client, &first, 0, 100), 0, 100);
        // Then every request is slow: each is due a duplicate after 5 ms.
        server.add_fault(FaultRule::new(Fault::Latency(Duration::from_millis(50))));
        let object = locate(&client, &server, "/o");
        let reads: Vec<(u64, u64)> = (1..=8).map(|i| (i * MIB, 4 * KIB)).collect();
        let batch = client.submit_with(
            reads.iter().map(|&(o, l)| Read::new(&object, o, l)),
            &BatchOptions::new().max_gap(0),
        );
        for (c, &(o, l)) in drain(&batch).iter().zip(&reads) {
            assert_ok(c, o, l);
        }
        (server.requests().len(), client.transport_stats().hedges)
    };
    // The 503 and its retry, then one request per read: not one duplicate.
    assert_eq!(run(true), (2 + 8, 0));
    // The same reads of an endpoint that did not throttle are hedged.
    let (requests, hedges) = run(false);
    assert!(hedges > 0, "{requests} requests");
    assert!((1 + 8..=1 + 8 + hedges).contains(&(requests as u64)));
}

#[test]
fn a_duplicate_answered_by_another_version_fails_a_one_version_read() {
    let server = server();
    server.set_etag("/o", Some("\"v1\""));
    // Of the two reads' requests, the second to arrive is never answered; its duplicate (the
    // third request) finds the object changed. The first answer pinned the batch to "v1", but
    // only once both requests had arrived (a barrier holds the first until the second is
    // there): neither asked for "v1", and neither does the duplicate, a copy of its original.
    server.add_fault(FaultRule::new(Fault::Barrier(2)).times(2));
    server.add_fault(FaultRule::new(Fault::NeverAnswer).skip(1).times(1));
    server.add_fault(FaultRule::new(Fault::ChangeEtag).skip(2).times(1));
    let client = build(hedging("300ms", "100%"));
    let object = locate(&client, &server, "/o");
    let reads = [(0, 1000), (2 * MIB, 1000)];
    let batch = client.submit_with(
        reads.iter().map(|&(o, l)| Read::new(&object, o, l)),
        &BatchOptions::new().one_version().max_gap(0),
    );
    let done = drain(&batch);
    let log = server.requests();
    assert_eq!(log.len(), 3, "{}", describe(&log));
    assert!(
        log.iter().all(|r| r.header("if-match").is_none()),
        "{}",
        describe(&log)
    );
    let slowed = never_answered(&log);
    let hedged = reads
        .iter()
        .position(|&(o, _)| slowed.map(|r| r.0) == Some(o))
        .expect("the never-answered request is one of the reads'");
    let (kept, failed) = (1 - hedged, hedged);
    assert_ok(&done[kept], reads[kept].0, reads[kept].1);
    assert_failed(&done[failed], Status::PreconditionFailed);
    match done[failed].error().and_then(|e| e.evidence()) {
        Some(Evidence::Response(Rejection::Changed { required, actual })) => {
            assert_eq!(required, "\"v1\"");
            assert_ne!(actual, "\"v1\"");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(log[2].byte_range, slowed);
    assert_eq!(
        log[2].status, 206,
        "the duplicate was answered, by another version"
    );
    let stats = client.transport_stats();
    assert_eq!((stats.hedges, stats.hedges_won), (1, 0));
}

#[test]
fn when_both_answers_arrive_only_one_lands_in_the_destination() {
    // The original is held at a barrier until its duplicate arrives; then both are answered
    // at once, the duplicate from a new version of the object whose every byte differs from
    // the first's: bytes of the two mixed in the destination would show.
    let server = MockServer::start();
    let size = 4 * MIB as usize;
    let first = pattern(0, size);
    let second = karu_testkit::pattern_version(1, 0, size);
    server.insert("/o", first.clone());
    server.add_fault(FaultRule::new(Fault::Barrier(2)).times(2));
    server.add_fault(FaultRule::new(Fault::ChangeContent).skip(1).times(1));
    let client = build(hedging("50ms", "100%"));
    let object = locate(&client, &server, "/o");
    let (offset, length) = (3 * MIB as usize, 256 * KIB as usize);
    let done = drain(&client.submit([Read::new(&object, offset as u64, length as u64)]));
    assert_eq!(done[0].status(), Status::Ok, "{:?}", done[0]);
    let got = done[0].bytes();
    let wanted = [&first[offset..][..length], &second[offset..][..length]];
    if !wanted.contains(&got) {
        let from_first = got.iter().zip(wanted[0]).filter(|(a, b)| a == b).count();
        panic!(
            "the destination holds {from_first} bytes of the first version and {} of the \
             second: two answers landed",
            length - from_first
        );
    }
    let log = server.requests();
    // Both passed the barrier together and were answered by the server (the loser's head
    // may still be on its way when the winner's has passed the checks and the loser is
    // cancelled: then the server records no status for it)...
    assert_eq!(log.len(), 2, "{}", describe(&log));
    let statuses = (log[0].status, log[1].status);
    assert!(
        [(206, 206), (206, 0), (0, 206)].contains(&statuses),
        "{}",
        describe(&log)
    );
    assert_eq!(log[0].byte_range, log[1].byte_range);
    assert_ne!(log[0].connection, log[1].connection);
    // ...and the bytes of exactly one landed: the transfer received one body.
    assert_eq!(done[0].timing().transfer_bytes(), length as u64);
    let stats = client.transport_stats();
    assert_eq!(stats.hedges, 1);
    assert!(stats.hedges_won <= 1);
}

#[test]
fn a_throttled_answer_to_a_request_that_lost_its_race_still_reaches_the_endpoint() {
    let server = server();
    // The original is held until its duplicate has arrived and answered 500 ms after it
    // arrived; the duplicate is answered `503 SlowDown` at once. The 503 comes first, while
    // the original still races, which then wins.
    server.add_fault(FaultRule::new(Fault::Barrier(2)).path("/o").times(2));
    server.add_fault(
        FaultRule::new(Fault::Latency(Duration::from_millis(500)))
            .path("/o")
            .times(1),
    );
    server.add_fault(
        FaultRule::new(Fault::Status {
            code: 503,
            retry_after: None,
        })
        .path("/o")
        .skip(1)
        .times(1),
    );
    let client = build(hedging("50ms", "100%"));
    let object = locate(&client, &server, "/o");
    assert_ok(&read_one(&client, &object, 0, 4 * KIB), 0, 4 * KIB);
    let log = server.requests();
    assert_eq!(
        log.iter().map(|r| r.status).collect::<Vec<_>>(),
        [206, 503],
        "{}",
        describe(&log)
    );
    let stats = client.transport_stats();
    assert_eq!((stats.hedges, stats.hedges_won, stats.retries), (1, 0, 0));
    // The endpoint throttled a moment ago: a slow request of another object of it gets no
    // duplicate (one that lost its race answered 503 all the same).
    server.insert_virtual("/slow", MIB);
    server.add_fault(FaultRule::new(Fault::Latency(Duration::from_millis(300))).path("/slow"));
    let slow = locate(&client, &server, "/slow");
    assert_ok(&read_one(&client, &slow, 0, 4 * KIB), 0, 4 * KIB);
    let log = server.requests();
    let slowed: Vec<_> = log.iter().filter(|r| r.path == "/slow").collect();
    assert_eq!(slowed.len(), 1, "{}", describe(&log));
}

#[test]
fn after_one_throttled_answer_duplicates_resume_within_a_window_of_answers() {
    let server = server();
    // One `503 SlowDown` to a read never hedged: the window (64) is cut, to 32.
    server.insert_virtual("/first", MIB);
    server.add_fault(
        FaultRule::new(Fault::Status {
            code: 503,
            retry_after: None,
        })
        .path("/first")
        .times(1),
    );
    let client =
        build(hedging("20ms", "100%").path_set(&server.url("/first"), "hedge.enabled", false));
    let first = locate(&client, &server, "/first");
    assert_ok(&read_one(&client, &first, 0, 100), 0, 100);
    // 64 answers without throttling: more than the 32 in flight when the window was cut.
    let object = locate(&client, &server, "/o");
    let reads: Vec<(u64, u64)> = (0..64).map(|i| (i * MIB, 4 * KIB)).collect();
    let batch = client.submit_with(
        reads.iter().map(|&(o, l)| Read::new(&object, o, l)),
        &BatchOptions::new().max_gap(0),
    );
    for (c, &(o, l)) in drain(&batch).iter().zip(&reads) {
        assert_ok(c, o, l);
    }
    // The throttling is over: a slow request is hedged again.
    server.insert_virtual("/slow", MIB);
    server.add_fault(
        FaultRule::new(Fault::Latency(Duration::from_millis(500)))
            .path("/slow")
            .times(1),
    );
    let slow = locate(&client, &server, "/slow");
    assert_ok(&read_one(&client, &slow, 0, 4 * KIB), 0, 4 * KIB);
    let log = server.requests();
    let slowed: Vec<_> = log.iter().filter(|r| r.path == "/slow").collect();
    assert_eq!(slowed.len(), 2, "{}", describe(&log));
}

#[test]
fn the_automatic_delay_counts_the_originals_that_lost_their_race() {
    // Answers with a heavy tail (Pareto: median 50 ms, 99th percentile 1 s) and a budget that
    // never runs out: only the automatic delay (the 95th percentile of the times to the head)
    // decides which requests get a duplicate, about one in twenty. Learning from the winners
    // alone, it would forget every slow original a duplicate beat, so that the percentile
    // falls, more requests are hedged, and it falls again: about twice as many.
    let server = server();
    server.add_fault(
        FaultRule::new(Fault::ParetoLatency {
            median: Duration::from_millis(50),
            p99: Duration::from_millis(1000),
        })
        .seed(7),
    );
    let client = build(
        quick()
            .set("hedge.enabled", true)
            .set("hedge.budget", "100%"),
    );
    let object = locate(&client, &server, "/o");
    let reads: Vec<(u64, u64)> = (0..3000).map(|i| (i * 20 * KIB, KIB)).collect();
    let batch = client.submit_with(
        reads.iter().map(|&(o, l)| Read::new(&object, o, l)),
        &BatchOptions::new().max_gap(0),
    );
    for (c, &(o, l)) in drain(&batch).iter().zip(&reads) {
        assert_ok(c, o, l);
    }
    let duplicates = server.request_count() - reads.len();
    assert!(
        duplicates * 40 <= reads.len() * 3,
        "{duplicates} duplicates of {} requests (at most 7.5 %)",
        reads.len()
    );
}

#[test]
fn over_http2_a_duplicate_goes_on_another_connection_than_its_original() {
    for version in ["http2", "auto"] {
        let server = MockServer::builder().tls(true).http2(true).start().unwrap();
        server.insert_virtual("/o", 64 * MIB);
        // The first request is never answered.
        server.add_fault(FaultRule::new(Fault::NeverAnswer).times(1));
        let ca = server.ca_file().unwrap();
        let client = build(
            hedging("100ms", "100%")
                .set("http.version", version)
                .set("http.ca_file", ca.to_str().unwrap()),
        );
        let object = locate(&client, &server, "/o");
        assert_ok(&read_one(&client, &object, MIB, 4 * KIB), MIB, 4 * KIB);
        let log = server.requests();
        assert_eq!(log.len(), 2, "{version}: {}", describe(&log));
        assert_eq!((log[0].status, log[1].status), (0, 206), "{version}");
        assert_ne!(
            log[0].connection,
            log[1].connection,
            "{version}: the duplicate went on its original's connection: {}",
            describe(&log)
        );
    }
}

#[test]
fn hedging_off_sends_no_duplicate() {
    let server = server();
    server.add_fault(FaultRule::new(Fault::Latency(Duration::from_millis(200))).times(1));
    let client = build(hedging("5ms", "100%").set("hedge.enabled", false));
    let object = locate(&client, &server, "/o");
    assert_ok(&read_one(&client, &object, 0, 4096), 0, 4096);
    assert_eq!(server.requests().len(), 1);
    assert_eq!(client.transport_stats().hedges, 0);
}
