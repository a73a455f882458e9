//! `BatchOptions::one_version` on the wire, against a mock whose object changes between
//! requests: the first strong ETag an answer states pins the object for the whole batch;
//! later requests carry it as `If-Match`, answers already in flight are compared with it, and
//! a read that sees another version fails with `PreconditionFailed` while the others go on.

#[path = "support/http.rs"]
mod http_support;

use http_support::{
    MIB, assert_failed, assert_ok, build, describe, drain, locate, quick, range_headers,
};
use karu::{BatchOptions, Client, Completion, Evidence, Locator, Read, Rejection, Status};
use karu_testkit::{Fault, FaultRule, MockServer, RequestRecord};

/// The object's first version.
const V1: &str = "\"v1\"";

/// Three reads far apart: three transfers.
const READS: [(u64, u64); 3] = [(0, 1000), (2 * MIB, 1000), (3 * MIB, 1000)];

fn changing_server() -> MockServer {
    let server = MockServer::start();
    server.insert_virtual("/o", 4 * MIB);
    server.set_etag("/o", Some(V1));
    server
}

fn submit(client: &Client, object: &Locator, options: &BatchOptions) -> Vec<Completion> {
    let batch = client.submit_with(READS.iter().map(|&(o, l)| Read::new(object, o, l)), options);
    drain(&batch)
}

/// The read whose range a logged request asked for.
fn read_of(request: &RequestRecord) -> usize {
    let (first, _) = request.byte_range.expect("a closed range");
    READS
        .iter()
        .position(|&(o, _)| o == first)
        .expect("a request for one of the reads")
}

fn if_matches(log: &[RequestRecord]) -> Vec<Option<&str>> {
    log.iter().map(|r| r.header("if-match")).collect()
}

fn statuses(log: &[RequestRecord]) -> Vec<u16> {
    log.iter().map(|r| r.status).collect()
}

#[test]
fn later_transfers_carry_the_first_tag_and_fail_once_the_object_changed() {
    // One transfer at a time, so each later request is sent after the first answer.
    let one_at_a_time = || build(quick().set("concurrency", "1"));

    // Without the option the batch mixes two versions, each answer correct on its own.
    let server = changing_server();
    server.add_fault(FaultRule::new(Fault::ChangeEtag).skip(1).times(1));
    let client = one_at_a_time();
    let object = locate(&client, &server, "/o");
    let done = submit(&client, &object, &BatchOptions::new());
    for (c, &(o, l)) in done.iter().zip(&READS) {
        assert_ok(c, o, l);
    }
    let log = server.requests();
    assert_eq!(if_matches(&log), [None, None, None], "{}", describe(&log));
    assert_eq!(statuses(&log), [206, 206, 206]);

    // With it, the second and third requests carry the first answer's tag and are refused.
    let server = changing_server();
    server.add_fault(FaultRule::new(Fault::ChangeEtag).skip(1).times(1));
    let client = one_at_a_time();
    let object = locate(&client, &server, "/o");
    let done = submit(&client, &object, &BatchOptions::new().one_version());
    let log = server.requests();
    assert_eq!(
        if_matches(&log),
        [None, Some(V1), Some(V1)],
        "{}",
        describe(&log)
    );
    assert_eq!(statuses(&log), [206, 412, 412], "412 is not retried");
    let first = read_of(&log[0]);
    let (o, l) = READS[first];
    assert_ok(&done[first], o, l);
    for i in (0..READS.len()).filter(|&i| i != first) {
        assert_failed(&done[i], Status::PreconditionFailed);
    }
}

#[test]
fn an_answer_in_flight_from_another_version_fails_its_read() {
    // Both requests are held at the server until both arrived (so neither carries a tag);
    // the first to arrive is answered from the first version, the second from a new one.
    let run = |options: &BatchOptions| {
        let server = changing_server();
        server.add_fault(FaultRule::new(Fault::Barrier(2)).times(2));
        server.add_fault(FaultRule::new(Fault::ChangeEtag).skip(1).times(1));
        let client = build(quick());
        let object = locate(&client, &server, "/o");
        let reads = [READS[0], READS[1]];
        let batch = client.submit_with(
            reads.iter().map(|&(o, l)| Read::new(&object, o, l)),
            options,
        );
        let done = drain(&batch);
        let log = server.requests();
        assert_eq!(if_matches(&log), [None, None], "{}", describe(&log));
        assert_eq!(statuses(&log), [206, 206]);
        let mut sorted = range_headers(&log);
        sorted.sort();
        assert_eq!(sorted, ["bytes=0-999", "bytes=2097152-2098151"]);
        done
    };

    let mixed = run(&BatchOptions::new());
    assert_ok(&mixed[0], READS[0].0, READS[0].1);
    assert_ok(&mixed[1], READS[1].0, READS[1].1);

    // Whichever answer Karu saw first pins the object; the other read saw another version.
    let done = run(&BatchOptions::new().one_version());
    let ok: Vec<usize> = (0..2).filter(|&i| done[i].is_ok()).collect();
    assert_eq!(ok.len(), 1, "{done:?}");
    let (kept, refused) = (ok[0], 1 - ok[0]);
    assert_ok(&done[kept], READS[kept].0, READS[kept].1);
    assert_failed(&done[refused], Status::PreconditionFailed);
    // The evidence: the version the batch was pinned to, and the one this answer stated.
    match done[refused].error().unwrap().evidence() {
        Some(Evidence::Response(Rejection::Changed { required, actual })) => {
            assert_ne!(required, actual);
        }
        other => panic!("no version evidence: {other:?}"),
    }
}

#[test]
fn a_server_ignoring_if_match_is_caught_by_the_pinned_tag() {
    let server = changing_server();
    server.add_fault(FaultRule::new(Fault::ChangeEtag).skip(1).times(1));
    server.add_fault(FaultRule::new(Fault::IgnoreIfMatch));
    let client = build(quick().set("concurrency", "1"));
    let object = locate(&client, &server, "/o");
    let done = submit(&client, &object, &BatchOptions::new().one_version());
    let log = server.requests();
    assert_eq!(
        if_matches(&log),
        [None, Some(V1), Some(V1)],
        "{}",
        describe(&log)
    );
    // The server served the new version anyway: Karu refused it at the head.
    assert_eq!(statuses(&log), [206, 206, 206]);
    let first = read_of(&log[0]);
    for (i, c) in done.iter().enumerate() {
        if i == first {
            assert_ok(c, READS[i].0, READS[i].1);
        } else {
            assert_failed(c, Status::PreconditionFailed);
        }
    }
}

#[test]
fn a_resume_that_meets_a_changed_object_fails_instead_of_starting_over() {
    let server = changing_server();
    server.add_fault(FaultRule::new(Fault::CutBodyAfter(30_000)).times(1));
    server.add_fault(FaultRule::new(Fault::ChangeEtag).skip(1).times(1));
    let client = build(quick());
    let object = locate(&client, &server, "/o");
    let batch = client.submit_with(
        [Read::new(&object, 1000, 300 << 10)],
        &BatchOptions::new().one_version(),
    );
    let done = drain(&batch);
    assert_failed(&done[0], Status::PreconditionFailed);
    let log = server.requests();
    let last = 1000 + (300 << 10) - 1;
    assert_eq!(
        range_headers(&log),
        [format!("bytes=1000-{last}"), format!("bytes=31000-{last}")],
        "no restart from the first byte:\n{}",
        describe(&log)
    );
    assert_eq!(if_matches(&log), [None, Some(V1)]);
    assert_eq!(statuses(&log), [206, 412]);
}

#[test]
fn without_a_strong_etag_nothing_is_pinned() {
    let server = changing_server();
    server.set_etag("/o", Some("W/\"weak\""));
    let client = build(quick().set("concurrency", "1"));
    let object = locate(&client, &server, "/o");
    let done = submit(&client, &object, &BatchOptions::new().one_version());
    for (c, &(o, l)) in done.iter().zip(&READS) {
        assert_ok(c, o, l);
    }
    let log = server.requests();
    assert_eq!(if_matches(&log), [None, None, None], "{}", describe(&log));
}
