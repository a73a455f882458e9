//! Remote ranges end to end against the mock server: exact bytes, which ranges went over the
//! wire (merging and its four guards), windows, the end of the object, reads that never reach
//! the server, identity conditions that keep reads apart, a missing object, and large
//! transfers fetched in parts (`http.part_size`): in parallel, each part retried or resumed
//! alone, never two versions in one read, and after a fast first part
//! (`http.fast_connection`) one long part per event loop.

#[path = "support/http.rs"]
mod http_support;

use http_support::{
    KIB, MIB, PATIENCE, assert_failed, assert_nothing_requested_twice, assert_ok, assert_prefix,
    build, client, describe, drain, eventually, locate, quick, range_headers, read_all, read_one,
    sorted_ranges, wait_for_requests,
};
use karu::{BatchOptions, Client, Next, Read, Status, UNBOUNDED};
use karu_testkit::{Fault, FaultRule, MockServer, pattern};

/// A virtual object of 1 GiB: its bytes are generated from the offset, never stored.
const BIG: u64 = 1 << 30;

fn server_with_big() -> MockServer {
    let server = MockServer::start();
    server.insert_virtual("/big.bin", BIG);
    server
}

/// Submit `reads` with `options` and return the logged ranges sorted, after checking every
/// read's bytes and that the requests match the plan.
#[track_caller]
fn guard_case(options: &BatchOptions, reads: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let server = server_with_big();
    let client = client();
    let object = locate(&client, &server, "/big.bin");
    let batch = client.submit_with(
        reads.iter().map(|&(o, l)| Read::new(&object, o, l)),
        options,
    );
    let done = drain(&batch);
    for (c, &(o, l)) in done.iter().zip(reads) {
        assert_ok(c, o, l);
    }
    let log = server.requests();
    assert_eq!(log.len(), batch.stats().transfers, "{}", describe(&log));
    assert_nothing_requested_twice(&log);
    sorted_ranges(&log)
}

#[test]
fn scattered_reads_of_a_large_object_arrive_exact_and_nothing_is_fetched_twice() {
    let server = server_with_big();
    let client = client();
    let object = locate(&client, &server, "/big.bin");
    // Far apart (separate requests), close together (merged), the first and the last byte,
    // odd offsets and lengths.
    let mut reads = vec![(0, 1), (BIG - 1, 1), (BIG - 4096, 4096), (12_345, 67_891)];
    for i in 0..40u64 {
        let base = i * 24 * MIB + 7 * i;
        reads.push((base + 3 * MIB, 1 + i * 997));
        reads.push((base + 3 * MIB + 50 * KIB, 4096 + i));
    }
    let batch = client.submit(reads.iter().map(|&(o, l)| Read::new(&object, o, l)));
    let stats = batch.stats();
    let done = drain(&batch);
    assert_eq!(done.len(), reads.len());
    for (c, &(o, l)) in done.iter().zip(&reads) {
        assert_ok(c, o, l);
    }
    let log = server.requests();
    assert_eq!(log.len(), stats.transfers, "{}", describe(&log));
    assert!(
        stats.transfers < reads.len(),
        "neighbours merged: {stats:?}"
    );
    assert!(log.iter().all(|r| r.status == 206 && r.path == "/big.bin"));
    assert_nothing_requested_twice(&log);
    // Every read lies inside exactly one requested range.
    let ranges = sorted_ranges(&log);
    for &(o, l) in &reads {
        let holding = ranges
            .iter()
            .filter(|&&(a, b)| a <= o && o + l - 1 <= b)
            .count();
        assert_eq!(holding, 1, "read ({o}, {l}) in {ranges:?}");
    }
    let fetched: u64 = log.iter().map(|r| r.body_bytes).sum();
    assert_eq!(
        fetched, stats.planned_bytes,
        "the server sent what the plan fetches"
    );
}

#[test]
fn reads_100_kib_apart_merge_into_one_request_for_exactly_their_hull() {
    let server = server_with_big();
    let client = client();
    let object = locate(&client, &server, "/big.bin");
    let start = 5 * MIB + 3;
    let reads: Vec<(u64, u64)> = (0..5).map(|i| (start + i * 164 * KIB, 64 * KIB)).collect();
    let done = read_all(&client, &object, &reads);
    for (c, &(o, l)) in done.iter().zip(&reads) {
        assert_ok(c, o, l);
    }
    let last = start + 4 * 164 * KIB + 64 * KIB - 1;
    let log = server.requests();
    assert_eq!(
        range_headers(&log),
        [format!("bytes={start}-{last}")],
        "{}",
        describe(&log)
    );
    assert_eq!(log[0].status, 206);
    assert_eq!(log[0].body_bytes, last - start + 1);
}

#[test]
fn reads_2_mib_apart_are_separate_requests() {
    let server = server_with_big();
    let client = client();
    let object = locate(&client, &server, "/big.bin");
    let reads: Vec<(u64, u64)> = (0..6).map(|i| (100 + i * (2 * MIB + 4096), 4096)).collect();
    let batch = client.submit(reads.iter().map(|&(o, l)| Read::new(&object, o, l)));
    let done = drain(&batch);
    for (c, &(o, l)) in done.iter().zip(&reads) {
        assert_ok(c, o, l);
    }
    let log = server.requests();
    assert_eq!(batch.stats().transfers, 6);
    let want: Vec<(u64, u64)> = reads.iter().map(|&(o, l)| (o, o + l - 1)).collect();
    assert_eq!(sorted_ranges(&log), want, "{}", describe(&log));
}

#[test]
fn the_default_gap_guard_merges_at_exactly_1_mib_and_not_one_byte_more() {
    let len = 64 * KIB;
    let a = 0;
    let b = a + len + MIB; // gap of exactly 1 MiB: merges
    let c = b + len + MIB + 1; // gap of 1 MiB + 1: a new request
    let ranges = guard_case(&BatchOptions::new(), &[(a, len), (b, len), (c, len)]);
    assert_eq!(ranges, [(a, b + len - 1), (c, c + len - 1)]);
}

#[test]
fn max_gap_is_observed_on_the_wire() {
    let options = BatchOptions::new().max_gap(1000);
    // A gap of 1000 merges; 1001 does not.
    let ranges = guard_case(&options, &[(0, 100), (1100, 100), (2201, 100)]);
    assert_eq!(ranges, [(0, 1199), (2201, 2300)]);
    // 0 disables merging, even for adjacent reads.
    let ranges = guard_case(&BatchOptions::new().max_gap(0), &[(0, 10), (10, 10)]);
    assert_eq!(ranges, [(0, 9), (10, 19)]);
}

#[test]
fn max_span_is_observed_on_the_wire() {
    let options = BatchOptions::new().max_span(1000);
    // A span of exactly 1000 merges; one byte more opens a new request.
    let ranges = guard_case(&options, &[(0, 500), (500, 500), (1000, 1), (1001, 999)]);
    assert_eq!(ranges, [(0, 999), (1000, 1999)]);
}

#[test]
fn max_parts_is_observed_on_the_wire() {
    let options = BatchOptions::new().max_parts(3);
    let reads: Vec<(u64, u64)> = (0..7).map(|i| (i * 10, 10)).collect();
    let ranges = guard_case(&options, &reads);
    assert_eq!(ranges, [(0, 29), (30, 59), (60, 69)]);
}

#[test]
fn max_amplification_is_observed_on_the_wire() {
    let options = BatchOptions::new().max_amplification(2);
    // Spans 250 / 200 useful, then 500 / 300: within 2x. Then 1000 / 400: 2.5x, refused.
    let ranges = guard_case(&options, &[(0, 100), (150, 100), (400, 100), (900, 100)]);
    assert_eq!(ranges, [(0, 499), (900, 999)]);
    // Overlapping reads count their useful bytes separately: 450 / 300 merges, where
    // 450 / 200 would not.
    let ranges = guard_case(&options, &[(0, 100), (350, 100)]);
    assert_eq!(ranges, [(0, 99), (350, 449)]);
    let ranges = guard_case(&options, &[(0, 100), (0, 100), (350, 100)]);
    assert_eq!(ranges, [(0, 449)]);
}

#[test]
fn overlapping_and_duplicate_reads_in_one_merged_transfer_each_get_their_bytes() {
    let server = server_with_big();
    let client = client();
    let object = locate(&client, &server, "/big.bin");
    let base = 77 * MIB + 5;
    let reads = [
        (base, 1000),
        (base + 500, 1000),
        (base + 500, 1000),
        (base + 600, 10),
        (base, 1),
        (base + 1499, 1),
    ];
    let done = read_all(&client, &object, &reads);
    for (c, &(o, l)) in done.iter().zip(&reads) {
        assert_ok(c, o, l);
    }
    let log = server.requests();
    assert_eq!(
        range_headers(&log),
        [format!("bytes={base}-{}", base + 1499)],
        "{}",
        describe(&log)
    );
}

#[test]
fn windowed_locators_shift_offsets_on_the_wire_by_the_window_start() {
    let server = server_with_big();
    let client = client();
    let object = locate(&client, &server, "/big.bin");
    let start = 300 * MIB + 17;
    let bounded = object.with_window(start, Some(MIB)).unwrap();
    let open = object.with_window(start, None).unwrap();

    let c = read_one(&client, &bounded, 1000, 100);
    assert_ok(&c, start + 1000, 100);
    let c = read_one(&client, &open, 5 * MIB, 10);
    assert_ok(&c, start + 5 * MIB, 10);
    // Reads of two windows of one object merge like any neighbours.
    let batch = client.submit([
        Read::new(&bounded, 0, 10),
        Read::new(&object.with_window(start + 20, Some(10)).unwrap(), 0, 10),
    ]);
    let done = drain(&batch);
    assert_ok(&done[0], start, 10);
    assert_ok(&done[1], start + 20, 10);
    // Leaving the bounded window is refused before any request.
    assert_failed(
        &read_one(&client, &bounded, MIB - 5, 10),
        Status::InvalidRange,
    );

    let log = server.requests();
    assert_eq!(
        range_headers(&log),
        [
            format!("bytes={}-{}", start + 1000, start + 1099),
            format!("bytes={}-{}", start + 5 * MIB, start + 5 * MIB + 9),
            format!("bytes={start}-{}", start + 29),
        ],
        "{}",
        describe(&log)
    );
}

#[test]
fn reads_reaching_the_end_of_the_object_get_the_valid_prefix_and_a_range_error() {
    let server = MockServer::start();
    server.insert("/small.bin", pattern(0, 1000));
    let client = client();
    let object = locate(&client, &server, "/small.bin");

    // Alone: the prefix that exists, then the rest is a range error.
    assert_prefix(&read_one(&client, &object, 900, 200), 900, 100);
    // Entirely beyond the end: 416, no bytes.
    assert_prefix(&read_one(&client, &object, 1000, 10), 1000, 0);
    assert_prefix(&read_one(&client, &object, 5000, 10), 5000, 0);
    // The last byte exactly: OK.
    assert_ok(&read_one(&client, &object, 999, 1), 999, 1);
    // In one merged transfer: the part inside is OK, the straddling part gets its prefix,
    // the part beyond gets nothing.
    let done = read_all(&client, &object, &[(950, 40), (980, 100), (1005, 10)]);
    assert_ok(&done[0], 950, 40);
    assert_prefix(&done[1], 980, 20);
    assert_prefix(&done[2], 1005, 0);

    let log = server.requests();
    assert_eq!(
        range_headers(&log),
        [
            "bytes=900-1099",
            "bytes=1000-1009",
            "bytes=5000-5009",
            "bytes=999-999",
            "bytes=950-1079"
        ],
        "{}",
        describe(&log)
    );
    let statuses: Vec<u16> = log.iter().map(|r| r.status).collect();
    assert_eq!(statuses, [206, 416, 416, 206, 206]);
}

#[test]
fn zero_length_unbounded_and_out_of_window_reads_never_reach_the_server() {
    let server = server_with_big();
    let client = client();
    let object = locate(&client, &server, "/big.bin");
    let window = object.with_window(1000, Some(100)).unwrap();
    let batch = client.submit([
        Read::new(&object, 10, 0),
        Read::new(&object, 10, UNBOUNDED),
        Read::new(&object, u64::MAX - 5, 10),
        Read::new(&window, 95, 10),
        Read::new(&window, 100, 1),
        Read::new(&object, 5, 5),
    ]);
    let stats = batch.stats();
    let done = drain(&batch);
    for c in &done[..5] {
        assert_failed(c, Status::InvalidRange);
    }
    assert_ok(&done[5], 5, 5);
    assert_eq!((stats.rejected, stats.transfers), (5, 1));
    let log = server.requests();
    assert_eq!(range_headers(&log), ["bytes=5-9"], "{}", describe(&log));

    // A batch of invalid reads only: no request at all.
    let done = drain(&client.submit([Read::new(&object, 0, 0), Read::new(&window, 0, 101)]));
    assert!(done.iter().all(|c| c.status() == Status::InvalidRange));
    assert_eq!(server.request_count(), 1);
}

#[test]
fn reads_with_different_if_match_values_never_merge() {
    let server = server_with_big();
    server.set_etag("/big.bin", Some("\"v1\""));
    let client = client();
    let object = locate(&client, &server, "/big.bin");
    let batch = client.submit([
        Read::new(&object, 0, 100).if_match("\"v1\""),
        Read::new(&object, 100, 100).if_match("*"),
        Read::new(&object, 200, 100),
        Read::new(&object, 300, 100).if_match("\"v1\""),
    ]);
    let done = drain(&batch);
    for (i, c) in done.iter().enumerate() {
        assert_ok(c, i as u64 * 100, 100);
    }
    assert_eq!(batch.stats().transfers, 3);
    let mut seen: Vec<(String, Option<String>)> = server
        .requests()
        .iter()
        .map(|r| {
            (
                r.range.clone().unwrap(),
                r.header("if-match").map(str::to_string),
            )
        })
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        [
            ("bytes=0-399".to_string(), Some("\"v1\"".to_string())),
            ("bytes=100-199".to_string(), Some("*".to_string())),
            ("bytes=200-299".to_string(), None),
        ]
    );
}

#[test]
fn a_missing_object_is_not_found_after_one_request() {
    let server = MockServer::start();
    let client = client();
    let object = locate(&client, &server, "/missing.bin");
    let c = read_one(&client, &object, 0, 10);
    assert_failed(&c, Status::NotFound);
    assert_eq!(c.error().unwrap().http_status(), Some(404));
    let log = server.requests();
    assert_eq!(range_headers(&log), ["bytes=0-9"], "not retried");
    assert_eq!(log[0].status, 404);
}

#[test]
fn the_range_header_is_exactly_bytes_first_last() {
    let server = server_with_big();
    let client = client();
    let object = locate(&client, &server, "/big.bin");
    for (o, l) in [(0, 1), (1, 1), (123_456_789, 1000), (BIG - 10, 10)] {
        assert_ok(&read_one(&client, &object, o, l), o, l);
    }
    let log = server.requests();
    assert_eq!(
        range_headers(&log),
        [
            "bytes=0-0".to_string(),
            "bytes=1-1".to_string(),
            "bytes=123456789-123457788".to_string(),
            format!("bytes={}-{}", BIG - 10, BIG - 1),
        ]
    );
    for r in &log {
        assert_eq!(r.method, "GET");
        assert_eq!(
            r.headers.iter().filter(|(n, _)| n == "range").count(),
            1,
            "one Range header: {r:?}"
        );
        assert_eq!(r.header("accept-encoding"), Some("identity"));
    }
}

#[test]
fn remote_reads_into_borrowed_slices_arrive_exact() {
    let server = server_with_big();
    let client = client();
    let object = locate(&client, &server, "/big.bin");
    let mut one = vec![0u8; 5000];
    client.read_into(&object, 999_999, &mut one).unwrap();
    assert_eq!(one, pattern(999_999, 5000));
    let (mut a, mut b, mut c) = ([0u8; 100], [0u8; 100], [0u8; 7]);
    client.scope(|scope| {
        let batch = scope.submit(
            [
                Read::borrowed(&object, 50 * MIB, &mut a),
                Read::borrowed(&object, 50 * MIB + 50, &mut b),
                Read::borrowed(&object, 900 * MIB, &mut c),
            ],
            &BatchOptions::new(),
        );
        assert!(drain(&batch).iter().all(|c| c.is_ok()));
    });
    assert_eq!(a.as_slice(), pattern(50 * MIB, 100));
    assert_eq!(b.as_slice(), pattern(50 * MIB + 50, 100));
    assert_eq!(c.as_slice(), pattern(900 * MIB, 7));
    let log = server.requests();
    let mut want = vec![
        "bytes=999999-1004998".to_string(),
        format!("bytes={}-{}", 50 * MIB, 50 * MIB + 149),
        format!("bytes={}-{}", 900 * MIB, 900 * MIB + 6),
    ];
    let mut got = range_headers(&log);
    want[1..].sort();
    got[1..].sort();
    assert_eq!(got, want);
}

#[test]
fn two_spellings_of_one_url_are_one_object_and_merge() {
    let server = server_with_big();
    let client = client();
    let a = client.locate(&server.url("/big.bin")).unwrap();
    let port = server.addr().port();
    let b = client
        .locate(&format!("HTTP://127.0.0.1:{port}/x/../big.bin#fragment"))
        .unwrap();
    let done = drain(&client.submit([Read::new(&a, 0, 10), Read::new(&b, 10, 10)]));
    assert_ok(&done[0], 0, 10);
    assert_ok(&done[1], 10, 10);
    let log = server.requests();
    assert_eq!(range_headers(&log), ["bytes=0-19"], "{}", describe(&log));
    assert_eq!(log[0].path, "/big.bin");
}

#[test]
fn local_and_remote_reads_share_one_batch() {
    let server = server_with_big();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("local.bin");
    std::fs::write(&path, pattern(0, 10_000)).unwrap();
    let client = client();
    let remote = locate(&client, &server, "/big.bin");
    let local = client.locate(path.to_str().unwrap()).unwrap();
    let batch = client.submit([
        Read::new(&remote, 100, 10).tag(1),
        Read::new(&local, 100, 10).tag(2),
        Read::new(&local, 9_995, 10).tag(3),
        Read::new(&remote, BIG - 5, 10).tag(4),
    ]);
    let done = drain(&batch);
    assert_eq!(
        done.iter().map(|c| c.tag()).collect::<Vec<_>>(),
        [1, 2, 3, 4]
    );
    assert_ok(&done[0], 100, 10);
    assert_ok(&done[1], 100, 10);
    assert_prefix(&done[2], 9_995, 5);
    assert_prefix(&done[3], BIG - 5, 5);
    let log = server.requests();
    let mut got = range_headers(&log);
    got.sort();
    assert_eq!(
        got,
        [
            "bytes=100-109".to_string(),
            format!("bytes={}-{}", BIG - 5, BIG + 4)
        ],
        "only the remote reads reach the server"
    );
}

/// A client that fetches transfers longer than 1 MiB in parts of 1 MiB, whatever the rate of
/// the first part: the loopback mock may count as a fast connection, whose transfers go in a
/// part per loop after the first (`http.fast_connection` of 0: no connection is fast).
fn parts_client() -> Client {
    build(fixed_parts())
}

/// Parts of 1 MiB, whatever the rate of the first part (see [`parts_client`]).
fn fixed_parts() -> karu::ClientBuilder {
    quick()
        .set("http.part_size", "1MiB")
        .set("http.fast_connection", 0)
}

/// A client fetching in parts of 1 MiB, with a concurrency limit of `concurrency` shared by
/// `loops` event loops.
fn parts_client_of(concurrency: u32, loops: u32) -> Client {
    build(
        fixed_parts()
            .set("concurrency", concurrency)
            .set("io_threads", loops),
    )
}

/// A client fetching in parts of 1 MiB on `loops` event loops (8 transfers at once), where
/// every first part that delivers bytes shows a fast connection (`http.fast_connection` of 1
/// byte a second): the rest of a transfer goes in one part per loop.
fn fast_parts_client(loops: u32) -> Client {
    build(
        quick()
            .set("http.part_size", "1MiB")
            .set("http.fast_connection", 1)
            .set("concurrency", 8)
            .set("io_threads", loops),
    )
}

/// The closed ranges of the parts of `len` bytes at `first`, in parts of 1 MiB.
fn parts_of(first: u64, len: u64) -> Vec<(u64, u64)> {
    (0..len.div_ceil(MIB))
        .map(|i| {
            (
                first + i * MIB,
                (first + (i + 1) * MIB).min(first + len) - 1,
            )
        })
        .collect()
}

#[test]
fn a_large_transfer_is_fetched_in_parts_all_in_flight_together() {
    let server = server_with_big();
    // The first part runs alone (its answer states the object's size); each of the four
    // others is held until all four are in flight: parts that ran one after the other would
    // never be answered.
    server.add_fault(FaultRule::new(Fault::Barrier(4)).skip(1));
    let client = parts_client();
    let object = locate(&client, &server, "/big.bin");
    // Two reads 100 bytes apart merge into one transfer of 4 MiB + 2,600 bytes: five parts,
    // which cut across the reads and the gap.
    let first = 3 * MIB + 7;
    let reads = [
        (first, 1536 * KIB),
        (first + 1536 * KIB + 100, 2560 * KIB + 2500),
    ];
    let span = reads[1].0 + reads[1].1 - first;
    let batch = client.submit(reads.iter().map(|&(o, l)| Read::new(&object, o, l)));
    assert_eq!(batch.stats().transfers, 1, "the two reads merge");
    let done = drain(&batch);
    for (c, &(o, l)) in done.iter().zip(&reads) {
        assert_ok(c, o, l);
    }
    let log = server.requests();
    assert_eq!(
        sorted_ranges(&log),
        parts_of(first, span),
        "{}",
        describe(&log)
    );
    assert_eq!(
        log[0].byte_range,
        Some((first, first + MIB - 1)),
        "the first part first"
    );
    assert_eq!(server.max_in_flight(), 4);
    assert!(log.iter().all(|r| r.status == 206), "{}", describe(&log));
}

#[test]
fn parts_run_on_idle_concurrency_only_and_a_short_transfer_is_one_request() {
    let server = server_with_big();
    // Concurrency 2 on one loop: one part on the transfer's permit, one on the idle permit.
    let client = parts_client_of(2, 1);
    let object = locate(&client, &server, "/big.bin");
    let done = read_all(&client, &object, &[(0, 5 * MIB), (100 * MIB, MIB)]);
    assert_ok(&done[0], 0, 5 * MIB);
    assert_ok(&done[1], 100 * MIB, MIB);
    let log = server.requests();
    let mut want = parts_of(0, 5 * MIB);
    want.push((100 * MIB, 101 * MIB - 1));
    assert_eq!(sorted_ranges(&log), want, "{}", describe(&log));
    assert!(server.max_in_flight() <= 2, "{}", server.max_in_flight());
}

#[test]
fn parts_run_on_every_loop_with_idle_permits() {
    let server = server_with_big();
    // Two loops of one permit each: the transfer's loop has no permit beyond the transfer's
    // own, so the second part in flight must run on the other loop. After the first part
    // (alone), the next two are held until both are in flight.
    server.add_fault(FaultRule::new(Fault::Barrier(2)).skip(1).times(2));
    let client = parts_client_of(2, 2);
    let object = locate(&client, &server, "/big.bin");
    let c = read_one(&client, &object, 5, 4 * MIB);
    assert_ok(&c, 5, 4 * MIB);
    let log = server.requests();
    assert_eq!(
        sorted_ranges(&log),
        parts_of(5, 4 * MIB),
        "each part once: {}",
        describe(&log)
    );
    assert_eq!(server.max_in_flight(), 2, "{}", describe(&log));
    // Each loop has its own connections: the two held parts came on two.
    let held: Vec<_> = log
        .iter()
        .filter(|r| r.fault.as_deref().is_some_and(|f| f.contains("Barrier")))
        .collect();
    assert_eq!(held.len(), 2, "{}", describe(&log));
    assert_ne!(held[0].connection, held[1].connection, "{}", describe(&log));
    // Every part after the first is pinned to the one version the first one stated.
    let mut pins: Vec<_> = log[1..].iter().map(|r| r.header("if-match")).collect();
    pins.dedup();
    assert!(pins.len() == 1 && pins[0].is_some(), "{}", describe(&log));
}

#[test]
fn a_failed_read_stops_its_parts_on_other_loops_and_its_buffer_is_left_alone() {
    let server = server_with_big();
    // After the first part, the second (on the transfer's loop) and the third (on the other
    // loop) are held until both have arrived; then the second is answered with a
    // `Content-Range` it did not ask for (a protocol error, never retried) while the third
    // trickles its megabyte out over seconds.
    server.add_fault(
        FaultRule::new(Fault::Barrier(2))
            .range_overlapping(MIB..3 * MIB)
            .times(2),
    );
    server.add_fault(
        FaultRule::new(Fault::WrongContentRange { shift: 10 }).range_overlapping(MIB..2 * MIB),
    );
    server.add_fault(
        FaultRule::new(Fault::Trickle {
            chunk: 16 * 1024,
            interval: std::time::Duration::from_millis(50),
        })
        .range_overlapping(2 * MIB..3 * MIB),
    );
    let client = parts_client_of(2, 2);
    let object = locate(&client, &server, "/big.bin");
    let mut buffer = vec![0xAAu8; (3 * MIB) as usize];
    let error = client
        .read_into(&object, 0, &mut buffer)
        .expect_err("a part was answered with another range");
    assert_eq!(error.status(), Status::Protocol, "{error}");
    // The buffer is the caller's again: nothing may write to it from here on, though the
    // trickling part was still being answered when the read failed.
    let returned = buffer.clone();
    eventually("every request ended", || server.in_flight() == 0);
    assert!(
        buffer == returned,
        "bytes landed in the buffer after the read returned"
    );
    let log = server.requests();
    assert_eq!(
        sorted_ranges(&log),
        parts_of(0, 3 * MIB),
        "each part once, none retried: {}",
        describe(&log)
    );
    // The third part was given up as soon as the read failed, not received to its end.
    let third = log
        .iter()
        .find(|r| r.byte_range == Some((2 * MIB, 3 * MIB - 1)))
        .expect("the third part");
    assert!(third.body_bytes < MIB, "{}", describe(&log));
}

#[test]
fn a_part_size_of_zero_never_splits() {
    let server = server_with_big();
    let client = build(quick().set("http.part_size", 0));
    let object = locate(&client, &server, "/big.bin");
    assert_ok(&read_one(&client, &object, 5, 20 * MIB), 5, 20 * MIB);
    assert_eq!(sorted_ranges(&server.requests()), [(5, 20 * MIB + 4)]);
}

#[test]
fn a_failed_part_is_retried_alone_and_an_interrupted_one_resumes_alone() {
    let server = server_with_big();
    // The third request answers 503; the fifth is cut after 1,000 bytes.
    server.add_fault(
        FaultRule::new(Fault::Status {
            code: 503,
            retry_after: None,
        })
        .skip(2)
        .times(1),
    );
    server.add_fault(FaultRule::new(Fault::CutBodyAfter(1000)).skip(4).times(1));
    let client = parts_client();
    let object = locate(&client, &server, "/big.bin");
    let c = read_one(&client, &object, 0, 6 * MIB);
    assert_ok(&c, 0, 6 * MIB);
    let log = server.requests();
    let failed = log.iter().find(|r| r.status == 503).expect("a 503");
    let cut = log
        .iter()
        .find(|r| {
            r.fault
                .as_deref()
                .is_some_and(|f| f.contains("CutBodyAfter"))
        })
        .expect("a cut answer");
    let (failed, cut) = (failed.byte_range.unwrap(), cut.byte_range.unwrap());
    // Every part once, the failed one again whole, the cut one from where it stopped.
    let mut want = parts_of(0, 6 * MIB);
    want.push(failed);
    want.push((cut.0 + 1000, cut.1));
    want.sort_unstable();
    assert_eq!(sorted_ranges(&log), want, "{}", describe(&log));
    assert_eq!(log.len(), 8);
    // The resumed part is pinned to the version of the bytes it keeps.
    let resumed = log
        .iter()
        .find(|r| r.byte_range == Some((cut.0 + 1000, cut.1)))
        .unwrap();
    assert!(resumed.header("if-match").is_some(), "{}", describe(&log));
}

#[test]
fn parts_of_one_read_never_mix_two_versions() {
    let server = server_with_big();
    server.set_etag("/big.bin", Some("\"v1\""));
    // The first part runs alone and pins its version; the three others are in flight
    // together, and the object changes before the second is answered: the parts would see
    // two versions.
    server.add_fault(FaultRule::new(Fault::Barrier(3)).skip(1));
    server.add_fault(FaultRule::new(Fault::ChangeEtag).skip(1).times(1));
    let client = parts_client();
    let object = locate(&client, &server, "/big.bin");
    let c = read_one(&client, &object, MIB, 4 * MIB);
    assert_failed(&c, Status::PreconditionFailed);
    let log = server.requests();
    assert_eq!(
        sorted_ranges(&log),
        parts_of(MIB, 4 * MIB),
        "{}",
        describe(&log)
    );

    // A part retried after the object changed carries the first version's tag: refused.
    let server = server_with_big();
    server.set_etag("/big.bin", Some("\"v1\""));
    let client = parts_client_of(1, 1);
    // One part at a time: the second is answered 503, and the object changes before its retry.
    server.add_fault(
        FaultRule::new(Fault::Status {
            code: 503,
            retry_after: None,
        })
        .skip(1)
        .times(1),
    );
    server.add_fault(FaultRule::new(Fault::ChangeEtag).skip(2).times(1));
    let object = locate(&client, &server, "/big.bin");
    let c = read_one(&client, &object, 0, 3 * MIB);
    assert_failed(&c, Status::PreconditionFailed);
    let log = server.requests();
    assert_eq!(
        log.iter().map(|r| r.header("if-match")).collect::<Vec<_>>(),
        [None, Some("\"v1\""), Some("\"v1\"")],
        "{}",
        describe(&log)
    );
    assert_eq!(log[2].status, 412);
}

#[test]
fn a_read_of_an_object_without_a_strong_etag_is_one_request_after_its_first_part() {
    let server = server_with_big();
    server.set_etag("/big.bin", None);
    let client = parts_client();
    let object = locate(&client, &server, "/big.bin");
    let c = read_one(&client, &object, 10, 3 * MIB);
    assert_ok(&c, 10, 3 * MIB);
    // The first part's answer names no version, so no other part could be proven to be of
    // the same one: instead of the other parts (and then the span again, as before: every
    // byte twice), the span in one request.
    let log = server.requests();
    assert_eq!(
        http_support::ranges(&log),
        [Some((10, MIB + 9)), Some((10, 3 * MIB + 9))],
        "{}",
        describe(&log)
    );
    // A weak ETag names no version either.
    let server = server_with_big();
    server.set_etag("/big.bin", Some("W/\"w1\""));
    let c = read_one(&client, &locate(&client, &server, "/big.bin"), 10, 3 * MIB);
    assert_ok(&c, 10, 3 * MIB);
    assert_eq!(
        http_support::ranges(&server.requests()),
        [Some((10, MIB + 9)), Some((10, 3 * MIB + 9))]
    );
    // The caller's strong tag binds every part (the server answers for it): no second fetch.
    let server = server_with_big();
    server.set_etag("/big.bin", None);
    server.add_fault(FaultRule::new(Fault::IgnoreIfMatch));
    let c =
        drain(&client.submit([
            Read::new(&locate(&client, &server, "/big.bin"), 0, 2 * MIB).if_match("\"v1\""),
        ]))
        .pop()
        .unwrap();
    assert_ok(&c, 0, 2 * MIB);
    assert_eq!(server.request_count(), 2);
}

#[test]
fn a_split_read_reaching_past_the_end_gives_the_valid_prefix() {
    let server = MockServer::start();
    server.insert_virtual("/o", 2 * MIB + 500);
    let client = parts_client();
    let object = locate(&client, &server, "/o");
    let c = read_one(&client, &object, 100, 5 * MIB);
    assert_prefix(&c, 100, 2 * MIB + 400);
    // The first part's answer states the size: only the three parts that hold bytes are
    // asked for, none past the end.
    let log = server.requests();
    assert_eq!(
        sorted_ranges(&log),
        parts_of(100, 5 * MIB)[..3],
        "{}",
        describe(&log)
    );
}

#[test]
fn cancelling_a_batch_ends_a_read_whose_parts_are_in_flight() {
    let server = server_with_big();
    // The third part is never answered; the others are.
    server.add_fault(FaultRule::new(Fault::NeverAnswer).skip(2).times(1));
    let client = parts_client();
    let object = locate(&client, &server, "/big.bin");
    let batch = client.submit([Read::new(&object, 0, 4 * MIB)]);
    wait_for_requests(&server, 4);
    batch.cancel();
    let c = match batch.next_timeout(PATIENCE) {
        Next::Completion(c) => c,
        other => panic!("no completion after cancel: {other:?}"),
    };
    assert_failed(&c, Status::Cancelled);
    assert_eq!(
        server.request_count(),
        4,
        "{}",
        describe(&server.requests())
    );
}

#[test]
fn after_a_fast_first_part_the_rest_goes_in_one_long_part_per_loop() {
    let server = server_with_big();
    server.set_etag("/big.bin", Some("\"v1\""));
    // After the first part, the two others are held until both are in flight: one on each
    // loop, at once.
    server.add_fault(FaultRule::new(Fault::Barrier(2)).skip(1).times(2));
    let client = fast_parts_client(2);
    let object = locate(&client, &server, "/big.bin");
    // 9 MiB + 5 bytes from byte 7: the first MiB alone, then the 8 MiB + 5 bytes after it in
    // two parts of 4 MiB + 3 bytes, rounded up to whole parts: 5 MiB, and the 3 MiB + 5 bytes
    // left. In parts of 1 MiB, it would have been ten requests.
    let (first, len) = (7, 9 * MIB + 5);
    let want = [
        (first, first + MIB - 1),
        (first + MIB, first + 6 * MIB - 1),
        (first + 6 * MIB, first + len - 1),
    ];
    let mut buffer = vec![1u8; len as usize];
    client
        .read_into(&object, first, &mut buffer)
        .expect("the read into the caller's buffer");
    assert!(
        buffer == pattern(first, len as usize),
        "the bytes of the read"
    );
    let log = server.take_requests();
    assert_eq!(
        sorted_ranges(&log),
        want,
        "each part once: {}",
        describe(&log)
    );
    assert_eq!(log[0].byte_range, Some(want[0]), "the first part first");
    assert!(log.iter().all(|r| r.status == 206), "{}", describe(&log));
    assert!(
        log.iter()
            .all(|r| r.body_bytes == r.byte_range.map_or(0, |(a, b)| b - a + 1)),
        "every part received whole: {}",
        describe(&log)
    );
    assert_eq!(server.max_in_flight(), 2, "{}", describe(&log));
    // Each loop has its own connections: the two long parts came on two.
    assert_ne!(log[1].connection, log[2].connection, "{}", describe(&log));
    // Each long part is pinned to the version the first one stated.
    assert_eq!(
        log.iter().map(|r| r.header("if-match")).collect::<Vec<_>>(),
        [None, Some("\"v1\""), Some("\"v1\"")],
        "{}",
        describe(&log)
    );

    // Into Karu's own buffer: the same requests.
    let bytes = client
        .read(&object, first, len)
        .expect("the read into Karu's buffer");
    assert!(
        bytes == pattern(first, len as usize),
        "the bytes of the read"
    );
    let log = server.take_requests();
    assert_eq!(sorted_ranges(&log), want, "{}", describe(&log));
    assert!(log.iter().all(|r| r.status == 206), "{}", describe(&log));
}

#[test]
fn a_fast_split_read_reaching_past_the_end_asks_only_for_parts_that_hold_bytes() {
    let server = MockServer::start();
    server.insert_virtual("/o", 5 * MIB + 500);
    let client = fast_parts_client(2);
    let object = locate(&client, &server, "/o");
    // 20 MiB from byte 100 of an object of 5 MiB + 500 bytes: the first part states the size,
    // so the 4 MiB + 400 bytes after it that exist go in two parts (2 MiB + 200 bytes each,
    // rounded up to 3 MiB), the second of which the object ends in; nothing past the end.
    let c = read_one(&client, &object, 100, 20 * MIB);
    assert_prefix(&c, 100, 5 * MIB + 400);
    let log = server.requests();
    assert_eq!(
        sorted_ranges(&log),
        [
            (100, MIB + 99),
            (MIB + 100, 4 * MIB + 99),
            (4 * MIB + 100, 7 * MIB + 99)
        ],
        "{}",
        describe(&log)
    );
    assert_eq!(
        log.iter().map(|r| r.status).collect::<Vec<_>>(),
        [206, 206, 206],
        "{}",
        describe(&log)
    );
}

#[test]
fn a_long_part_cut_short_resumes_from_its_proven_bytes() {
    let server = server_with_big();
    server.set_etag("/big.bin", Some("\"v1\""));
    // The second request, the rest of the read in one part (one loop), is cut after 1,000
    // bytes of its body.
    server.add_fault(FaultRule::new(Fault::CutBodyAfter(1000)).skip(1).times(1));
    let client = fast_parts_client(1);
    let object = locate(&client, &server, "/big.bin");
    let c = read_one(&client, &object, 0, 6 * MIB);
    assert_ok(&c, 0, 6 * MIB);
    let log = server.requests();
    // The first part, the rest of the span, and the rest of that after the bytes it proved:
    // nothing asked for twice.
    assert_eq!(
        http_support::ranges(&log),
        [
            Some((0, MIB - 1)),
            Some((MIB, 6 * MIB - 1)),
            Some((MIB + 1000, 6 * MIB - 1))
        ],
        "{}",
        describe(&log)
    );
    assert_eq!(log[1].body_bytes, 1000, "{}", describe(&log));
    // The resumed request is pinned to the version of the bytes it keeps.
    assert_eq!(
        log[2].header("if-match"),
        Some("\"v1\""),
        "{}",
        describe(&log)
    );
}

#[test]
fn a_slow_first_part_keeps_parts_of_the_part_size() {
    // Bodies paced at 20 MB/s: the first part's megabyte takes some 50 ms, far below the
    // default rate of a fast connection (1 GB/s), so the other parts are of the part size,
    // as many at once as permits allow, as on an object store's connection.
    let server = MockServer::builder()
        .bandwidth(Some(20_000_000))
        .start()
        .expect("the mock server starts");
    server.insert_virtual("/big.bin", BIG);
    let client = build(
        quick()
            .set("http.part_size", "1MiB")
            .set("concurrency", 8)
            .set("io_threads", 2),
    );
    let object = locate(&client, &server, "/big.bin");
    let c = read_one(&client, &object, 5, 4 * MIB);
    assert_ok(&c, 5, 4 * MIB);
    let log = server.requests();
    assert_eq!(
        sorted_ranges(&log),
        parts_of(5, 4 * MIB),
        "each part once: {}",
        describe(&log)
    );
    assert_eq!(
        log[0].byte_range,
        Some((5, MIB + 4)),
        "the first part first"
    );
}
