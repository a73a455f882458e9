//! `ObjectReader`: positional reads of one object from many threads at once, exact bytes or an
//! error that says where the object ends, `read_many` as one batch, and reads pinned to the
//! version the reader opened (the mock's request log shows each range and its `If-Match`).

#[path = "support/http.rs"]
mod http_support;

use std::sync::{Arc, Barrier};

use http_support::{assert_pattern, client, locate};
use karu::{Evidence, ObjectReader, Rejection, Status};
use karu_testkit::{Fault, FaultRule, MockServer, Rng, pattern};

const SIZE: u64 = 1 << 20;

/// `threads` threads, started together, each reading `per_thread` random ranges through one
/// reader (one in eight reaching past the end). Returns the `(offset, length)` of every read.
fn read_from_many_threads(reader: &ObjectReader, threads: u64, per_thread: u64) -> Vec<(u64, u64)> {
    let start = Arc::new(Barrier::new(threads as usize));
    let workers: Vec<_> = (0..threads)
        .map(|t| {
            let (reader, start) = (reader.clone(), Arc::clone(&start));
            std::thread::spawn(move || {
                let mut rng = Rng::new(t);
                let mut done = Vec::new();
                start.wait();
                for i in 0..per_thread {
                    let length = rng.range(1, 20_001);
                    let offset = if i % 8 == 7 {
                        SIZE - rng.range(0, length) // past the end
                    } else {
                        rng.range(0, SIZE - length + 1)
                    };
                    let mut dst = vec![0u8; length as usize];
                    let result = reader.read_at(offset, &mut dst);
                    let exists = (SIZE - offset).min(length);
                    if exists == length {
                        result.unwrap_or_else(|e| panic!("read_at({offset}, {length}): {e:?}"));
                        assert_pattern(&dst, offset, length);
                    } else {
                        let err = result.expect_err("a read past the end fails");
                        assert_eq!(err.status(), Status::RangeNotSatisfiable, "{err:?}");
                        match err.evidence() {
                            Some(&Evidence::EndOfObject {
                                offset: at,
                                requested,
                                received,
                                ..
                            }) => assert_eq!((at, requested, received), (offset, length, exists)),
                            other => panic!("no end-of-object evidence: {other:?}"),
                        }
                        assert_pattern(&dst[..exists as usize], offset, exists);
                    }
                    done.push((offset, length));
                }
                done
            })
        })
        .collect();
    workers
        .into_iter()
        .flat_map(|w| w.join().expect("a reading thread"))
        .collect()
}

#[test]
fn many_threads_read_one_local_object_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("object.bin");
    std::fs::write(&path, pattern(0, SIZE as usize)).unwrap();
    let client = client();
    let object = client.locate(path.to_str().unwrap()).unwrap();
    let reader = ObjectReader::open(&client, &object).unwrap();
    assert_eq!((reader.size(), reader.etag()), (SIZE, None));
    let reads = read_from_many_threads(&reader, 8, 100);
    assert_eq!(reads.len(), 800);
}

#[test]
fn many_threads_read_one_remote_object_at_once_pinned_to_its_version() {
    let server = MockServer::start();
    server.insert_virtual("/object.bin", SIZE);
    let client = client();
    let object = locate(&client, &server, "/object.bin");
    let reader = ObjectReader::open(&client, &object).unwrap();
    assert_eq!(reader.size(), SIZE);
    let etag = reader
        .etag()
        .expect("the mock states a strong ETag")
        .to_string();
    let probe = server.take_requests();
    assert_eq!(probe.len(), 1, "one stat");

    let reads = read_from_many_threads(&reader, 8, 40);
    // One request per read, for exactly its range (clamped at the end by the server's
    // answer, not by Karu), each pinned to the version the reader opened.
    let mut asked: Vec<(u64, u64)> = server
        .requests()
        .iter()
        .map(|r| {
            assert_eq!(r.header("if-match"), Some(etag.as_str()), "{r:?}");
            r.byte_range.expect("a closed range")
        })
        .collect();
    let mut expected: Vec<(u64, u64)> = reads.iter().map(|&(o, l)| (o, o + l - 1)).collect();
    asked.sort_unstable();
    expected.sort_unstable();
    assert_eq!(asked, expected);
}

#[test]
fn read_many_is_one_batch_with_exact_bytes_per_range() {
    let server = MockServer::start();
    server.insert_virtual("/tile.bin", SIZE);
    let client = client();
    let reader = ObjectReader::open(&client, &locate(&client, &server, "/tile.bin")).unwrap();
    server.take_requests();

    // A tile's parts: two neighbours (merged), one far away, and an empty one.
    let ranges = [(0, 100), (200, 100), (500_000, 10), (7, 0)];
    let parts = reader.read_many(&ranges).unwrap();
    assert_eq!(parts.len(), 4);
    for (bytes, &(o, l)) in parts.iter().zip(&ranges) {
        assert_pattern(bytes, o, l);
    }
    let mut asked: Vec<_> = server.requests().iter().map(|r| r.byte_range).collect();
    asked.sort_unstable();
    assert_eq!(asked, vec![Some((0, 299)), Some((500_000, 500_009))]);

    // A failing range fails the call with the error of the first one that failed.
    let err = reader
        .read_many(&[(10, 10), (SIZE - 4, 8), (SIZE + 10, 1)])
        .unwrap_err();
    assert_eq!(err.status(), Status::RangeNotSatisfiable);
    assert!(
        matches!(
            err.evidence(),
            Some(&Evidence::EndOfObject { offset, requested: 8, received: 4, .. }) if offset == SIZE - 4
        ),
        "{err:?}"
    );
}

#[test]
fn a_reader_refuses_bytes_of_another_version() {
    let server = MockServer::start();
    server.insert_virtual("/object.bin", SIZE);
    let client = client();
    let object = locate(&client, &server, "/object.bin");
    let reader = ObjectReader::open(&client, &object).unwrap();
    let opened = reader.etag().unwrap().to_string();
    let mut dst = [0u8; 16];
    reader.read_at(100, &mut dst).unwrap();

    // The object is replaced: the server refuses the pinned request (412).
    server.set_etag("/object.bin", Some("\"v2\""));
    let err = reader.read_at(100, &mut dst).unwrap_err();
    assert_eq!(
        (err.status(), err.http_status()),
        (Status::PreconditionFailed, Some(412))
    );
    assert!(!err.is_transient());

    // A server that ignores If-Match: Karu compares the answer's ETag itself.
    server.add_fault(FaultRule::new(Fault::IgnoreIfMatch));
    let err = reader.read_at(100, &mut dst).unwrap_err();
    assert_eq!(err.status(), Status::PreconditionFailed);
    assert_eq!(
        err.evidence(),
        Some(&Evidence::Response(Rejection::Changed {
            required: opened.clone(),
            actual: "\"v2\"".to_string(),
        }))
    );
    let log = server.requests();
    assert!(
        log[1..]
            .iter()
            .all(|r| r.header("if-match") == Some(opened.as_str())),
        "{log:#?}"
    );
}

#[test]
fn a_reader_of_a_known_size_asks_nothing_and_pins_only_when_told() {
    let server = MockServer::start();
    server.insert_virtual("/object.bin", SIZE);
    let client = client();
    let object = locate(&client, &server, "/object.bin");
    let reader = ObjectReader::with_size(&client, &object, SIZE);
    assert_eq!((reader.size(), reader.etag()), (SIZE, None));
    assert_eq!(server.request_count(), 0, "nothing asked");

    let mut dst = [0u8; 10];
    reader.read_at(0, &mut dst).unwrap();
    reader.read_at(5, &mut []).unwrap(); // an empty read reads nothing
    let pinned = reader.clone().if_match("\"v1\"");
    server.set_etag("/object.bin", Some("\"v1\""));
    pinned.read_at(10, &mut dst).unwrap();
    assert_pattern(&dst, 10, 10);
    let log = server.requests();
    assert_eq!(log.len(), 2, "{log:#?}");
    assert_eq!(log[0].header("if-match"), None);
    assert_eq!(log[1].header("if-match"), Some("\"v1\""));
}

#[test]
fn async_reads_of_a_reader_match_the_blocking_ones() {
    let server = MockServer::start();
    server.insert_virtual("/object.bin", SIZE);
    let client = client();
    let object = locate(&client, &server, "/object.bin");
    let reader = futures::executor::block_on(ObjectReader::open_async(&client, &object)).unwrap();
    assert_eq!(reader.size(), SIZE);

    let mut dst = vec![0u8; 64];
    futures::executor::block_on(reader.read_at_async(SIZE - 64, &mut dst)).unwrap();
    assert_pattern(&dst, SIZE - 64, 64);
    // Past the end: the prefix that exists is copied, and the error says how long it is.
    let mut dst = vec![0u8; 64];
    let err = futures::executor::block_on(reader.read_at_async(SIZE - 10, &mut dst)).unwrap_err();
    assert!(matches!(
        err.evidence(),
        Some(Evidence::EndOfObject { received: 10, .. })
    ));
    assert_pattern(&dst[..10], SIZE - 10, 10);
    assert_eq!(&dst[10..], &[0u8; 54][..]);

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let parts = runtime
        .block_on(runtime.spawn(reader.read_many_async(&[(1, 2), (3, 4)])))
        .unwrap()
        .unwrap();
    assert_eq!(parts, vec![pattern(1, 2), pattern(3, 4)]);
}
