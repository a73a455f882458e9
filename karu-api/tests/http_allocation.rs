//! Memory follows the data, not the request: a Karu-allocated destination of a remote read
//! holds what the response delivers, so a caller-chosen length far beyond the object (8 GB,
//! 1 TiB, nearly `u64::MAX`: sizes whose allocation would fail or abort) never allocates it,
//! and `read_ends` clamps both ends to the size its first answer states.

#[path = "support/http.rs"]
mod http_support;

use http_support::{
    KIB, MIB, assert_ok, assert_pattern, assert_prefix, client, drain, locate, read_one,
};
use karu::{BatchOptions, Read};
use karu_testkit::{MockServer, pattern};

const SIZE: u64 = 20 * MIB;

/// Lengths no process could allocate (or should, for a 20 MiB object).
const HUGE: [u64; 3] = [8_000_000_000, 1 << 40, u64::MAX - (1 << 30)];

fn server() -> MockServer {
    let server = MockServer::start();
    server.insert_virtual("/obj.bin", SIZE);
    server
}

#[test]
fn a_read_far_beyond_a_small_object_holds_only_the_bytes_that_exist() {
    let server = server();
    let client = client();
    let object = locate(&client, &server, "/obj.bin");
    for length in HUGE {
        for offset in [0, 5 * MIB] {
            let c = read_one(&client, &object, offset, length);
            assert_prefix(&c, offset, SIZE - offset);
            let buffer = c.into_buffer().expect("a Karu-allocated buffer");
            assert_eq!(
                buffer.capacity() as u64,
                SIZE - offset,
                "reserved once, for what the response stated ({length} bytes asked at {offset})"
            );
        }
    }
    // One request each, but for the 8 GB reads, which are fetched in parts of 8 MiB (the
    // default): only the parts that hold bytes, since the first part's answer states the size
    // (3 from offset 0, 2 from 5 MiB). The longer reads would be more parts than Karu splits
    // into: one request.
    karu_testkit::reads::assert_requests(&server.requests(), 2 * HUGE.len() + 3);
}

#[test]
fn merged_parts_past_the_end_hold_their_own_prefix_and_owned_buffers_keep_their_capacity() {
    let server = server();
    let client = client();
    let object = locate(&client, &server, "/obj.bin");
    let batch = client.submit_with(
        [
            Read::new(&object, SIZE - 100, 50),
            Read::new(&object, SIZE - 40, 1 << 20),
            Read::new(&object, 1000, 100).with_buffer(Vec::with_capacity(64 * KIB as usize)),
        ],
        &BatchOptions::new().max_gap(MIB),
    );
    let done = drain(&batch);
    assert_ok(&done[0], SIZE - 100, 50);
    assert_prefix(&done[1], SIZE - 40, 40);
    assert_ok(&done[2], 1000, 100);
    let mut done = done.into_iter();
    let _ = done.next();
    let past = done.next().unwrap().into_buffer().unwrap();
    assert_eq!(
        past.capacity(),
        40,
        "holds what arrived, not the MiB asked for"
    );
    let owned = done.next().unwrap().into_buffer().unwrap();
    assert_eq!(
        owned.capacity(),
        64 * KIB as usize,
        "the caller's buffer is reused"
    );
    assert_eq!(server.request_count(), 2, "{:?}", server.requests());
}

#[test]
fn read_ends_clamps_huge_ends_to_the_size_of_the_object() {
    let server = server();
    let client = client();
    let object = locate(&client, &server, "/obj.bin");
    for (head, tail) in [(1 << 40, 16), (16, 1 << 40), (u64::MAX, u64::MAX)] {
        let ends = client.read_ends(&object, head, tail).unwrap();
        assert_eq!(ends.size, SIZE);
        let (h, t) = (head.min(SIZE), tail.min(SIZE));
        assert_pattern(&ends.head, 0, h);
        assert_pattern(&ends.tail, SIZE - t, t);
        assert!(ends.head.capacity() as u64 <= h && ends.tail.capacity() as u64 <= t);
    }
    // Windows too: an open one (clamped by the answer) and a bounded one (by its length).
    let open = object.with_window(1000, None).unwrap();
    let ends = client.read_ends(&open, 1 << 40, 1 << 40).unwrap();
    assert_eq!(ends.size, SIZE - 1000);
    assert_eq!(ends.head, pattern(1000, (SIZE - 1000) as usize));
    assert_eq!(ends.tail, ends.head);
    let bounded = object.with_window(1000, Some(5000)).unwrap();
    let ends = client.read_ends(&bounded, 1 << 40, u64::MAX).unwrap();
    assert_eq!(ends.size, 5000);
    assert_eq!(ends.head, pattern(1000, 5000));
    assert_eq!(ends.tail, pattern(1000, 5000));
}
