//! `KaruStore` against the mock HTTP server: object_store's read-side conformance (every
//! `GetRange` form, ranges at the ends, the empty, missing and changed object), the evidence
//! of the request log (no HEAD, one request per range, `get_ranges` as one merged batch, chunks
//! pinned with `If-Match`), the fault plan under `get_ranges`, and the operations Karu refuses.

mod support;

use std::ops::Range;

use bytes::Bytes;
use futures::StreamExt;
use karu::Status;
use karu_object_store::KaruStore;
use karu_testkit::http::url_path;
use karu_testkit::{Fault, FaultRule, MockServer, RequestRecord, pattern};
use object_store::path::Path;
use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreExt, PutPayload};
use support::isolated;

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    futures::executor::block_on(f)
}

fn store(server: &MockServer) -> KaruStore {
    KaruStore::new(&server.base_url(), &isolated().build().unwrap()).unwrap()
}

/// The Karu error behind an object_store error.
fn karu_error(error: &object_store::Error) -> &karu::Error {
    std::error::Error::source(error)
        .and_then(|s| s.downcast_ref::<karu::Error>())
        .unwrap_or_else(|| panic!("no Karu error behind {error:?}"))
}

fn get(
    store: &KaruStore,
    path: &str,
    range: Option<GetRange>,
) -> object_store::Result<(Range<u64>, u64, Bytes)> {
    block_on(async {
        let result = store
            .get_opts(&Path::from(path), GetOptions::new().with_range(range))
            .await?;
        let (range, size) = (result.range.clone(), result.meta.size);
        Ok((range, size, result.bytes().await?))
    })
}

fn ranges_of(log: &[RequestRecord]) -> Vec<String> {
    log.iter()
        .map(|r| format!("{} {}", r.method, r.range.as_deref().unwrap_or("-")))
        .collect()
}

#[test]
fn every_range_form_is_one_read_with_the_size_from_its_answer() {
    let server = MockServer::start();
    let data = Bytes::from_static(b"arbitrary data");
    server.insert("/dir/data.bin", data.clone());
    let store = store(&server);
    let cases: [(Option<GetRange>, Range<u64>, &[&str]); 6] = [
        (Some(GetRange::Bounded(2..5)), 2..5, &["GET bytes=2-4"]),
        (Some(GetRange::Bounded(2..100)), 2..14, &["GET bytes=2-99"]),
        (Some(GetRange::Offset(3)), 3..14, &["GET bytes=3-8388610"]),
        (None, 0..14, &["GET bytes=0-8388607"]),
        // A suffix's answer states the size: no request probes it.
        (Some(GetRange::Suffix(2)), 12..14, &["GET bytes=-2"]),
        (Some(GetRange::Suffix(100)), 0..14, &["GET bytes=-100"]),
    ];
    for (range, expected, requests) in cases {
        server.take_requests();
        let (got, size, bytes) = get(&store, "dir/data.bin", range.clone()).unwrap();
        assert_eq!((got.clone(), size), (expected.clone(), 14), "{range:?}");
        assert_eq!(
            bytes,
            data.slice(expected.start as usize..expected.end as usize)
        );
        let mut log = ranges_of(&server.take_requests());
        log.sort();
        assert_eq!(log, requests, "{range:?}");
    }
    // Starting at or past the end, or empty: errors, as object_store's own stores answer.
    for range in [
        GetRange::Offset(14),
        GetRange::Offset(100),
        GetRange::Bounded(200..300),
        GetRange::Bounded(14..15),
    ] {
        let error = get(&store, "dir/data.bin", Some(range.clone())).unwrap_err();
        assert!(
            matches!(error, object_store::Error::Generic { .. }),
            "{range:?}: {error:?}"
        );
    }
    let error = get(&store, "dir/data.bin", Some(GetRange::Bounded(5..5))).unwrap_err();
    assert!(matches!(error, object_store::Error::Generic { .. }));
    // `get_range`, `head` and `get_ranges` of the same object.
    block_on(async {
        let path = Path::from("dir/data.bin");
        assert_eq!(
            store.get_range(&path, 3..7).await.unwrap(),
            data.slice(3..7)
        );
        let head = store.head(&path).await.unwrap();
        assert_eq!((head.size, head.location.clone()), (14, path.clone()));
        assert!(head.e_tag.is_some());
        let ranges = [0..1, 2..3, 0..5];
        let got = store.get_ranges(&path, &ranges).await.unwrap();
        for (range, bytes) in ranges.iter().zip(got) {
            assert_eq!(bytes, data.slice(range.start as usize..range.end as usize));
        }
    });
    assert!(server.requests().iter().all(|r| r.method == "GET"));
}

#[test]
fn a_whole_object_streams_in_chunks_pinned_to_the_first_answers_version() {
    let server = MockServer::start();
    let size = (1 << 20) + 1000;
    server.insert("/big.bin", pattern(0, size));
    let client = isolated().set("http.part_size", "64KiB").build().unwrap();
    let store = KaruStore::new(&server.base_url(), &client).unwrap();
    let (chunks, etag) = block_on(async {
        let result = store.get(&Path::from("big.bin")).await.unwrap();
        assert_eq!(
            (result.range.clone(), result.meta.size),
            (0..size as u64, size as u64)
        );
        let etag = result.meta.e_tag.clone().unwrap();
        let chunks: Vec<Bytes> = result.into_stream().map(|c| c.unwrap()).collect().await;
        (chunks, etag)
    });
    assert_eq!(
        chunks.len(),
        17,
        "16 chunks of 64 KiB and the last 1,000 bytes"
    );
    assert!(chunks.iter().all(|c| c.len() <= 64 << 10));
    assert_eq!(chunks.concat(), pattern(0, size));
    let log = server.requests();
    assert_eq!(log.len(), 17);
    assert_eq!(log[0].byte_range, Some((0, (64 << 10) - 1)));
    assert_eq!(log[0].header("if-match"), None);
    for r in &log[1..] {
        assert_eq!(r.header("if-match"), Some(etag.as_str()), "{r}");
    }
}

#[test]
fn an_object_replaced_under_a_stream_fails_it_instead_of_mixing_versions() {
    let server = MockServer::start();
    let size = 300 << 10;
    server.insert("/v.bin", pattern(0, size));
    let client = isolated().set("http.part_size", "64KiB").build().unwrap();
    let store = KaruStore::new(&server.base_url(), &client).unwrap();
    let error = block_on(async {
        let result = store.get(&Path::from("v.bin")).await.unwrap();
        // The first answer is in; the chunks after it start when the stream is polled.
        server.insert("/v.bin", pattern(7, size));
        let mut stream = result.into_stream();
        let first = stream.next().await.unwrap().unwrap();
        assert_eq!(first, pattern(0, 64 << 10));
        loop {
            match stream.next().await {
                Some(Ok(_)) => continue,
                Some(Err(e)) => break e,
                None => panic!("the stream ended without an error"),
            }
        }
    });
    assert!(
        matches!(error, object_store::Error::Precondition { .. }),
        "{error:?}"
    );
    assert_eq!(karu_error(&error).status(), Status::PreconditionFailed);
    assert!(server.requests().iter().skip(1).any(|r| r.status == 412));
}

/// Where `bytes` stop being `v1`'s prefix, for messages: "the first N bytes of v1, then …".
fn provenance(bytes: &[u8], v1: &[u8], v2: &[u8]) -> String {
    let from_v1 = bytes.iter().zip(v1).take_while(|(a, b)| a == b).count();
    let rest = if bytes.len() >= from_v1
        && v2.len() >= bytes.len()
        && bytes[from_v1..] == v2[from_v1..bytes.len()]
    {
        "the second version's"
    } else {
        "other"
    };
    format!(
        "{} bytes: the first {from_v1} of the first version, then {} bytes of {rest}",
        bytes.len(),
        bytes.len() - from_v1
    )
}

/// The bytes of a get of `range`, read to the end of its stream, or its first error.
fn get_all(
    store: &KaruStore,
    path: &str,
    range: Option<GetRange>,
) -> object_store::Result<(Range<u64>, Bytes)> {
    block_on(async {
        let result = store
            .get_opts(&Path::from(path), GetOptions::new().with_range(range))
            .await?;
        let range = result.range.clone();
        let mut stream = result.into_stream();
        let mut bytes = Vec::new();
        while let Some(chunk) = stream.next().await {
            bytes.extend_from_slice(&chunk?);
        }
        Ok((range, Bytes::from(bytes)))
    })
}

/// 20 MiB served without a strong ETag (none, or a weak one) and replaced after the first
/// request of a read: every read returns the bytes of one version (or fails), never the first
/// part of one and the rest of the other.
#[test]
fn a_changing_object_without_a_strong_etag_is_read_as_one_version() {
    let size: u64 = 20 << 20;
    let (v1, v2) = (pattern(0, size as usize), pattern(7, size as usize));
    for etag in [None, Some("W/\"weak\"")] {
        let server = MockServer::start();
        server.insert("/v1", v1.clone());
        server.insert("/v2", v2.clone());
        server.set_etag("/v1", etag);
        server.set_etag("/v2", etag);
        let store = store(&server);
        let cases = [
            None,
            Some(GetRange::Bounded(0..size)),
            Some(GetRange::Offset(1 << 20)),
            Some(GetRange::Suffix(12 << 20)),
        ];
        for range in cases {
            support::Versions::install(&server, "/obj", "/v1", "/v2", 1);
            server.take_requests();
            let outcome = get_all(&store, "obj", range.clone());
            let log = server.take_requests();
            let shown: Vec<String> = log.iter().map(ToString::to_string).collect();
            match outcome {
                Ok((got, bytes)) => {
                    let (a, b) = (got.start as usize, got.end as usize);
                    assert!(
                        bytes[..] == v1[a..b] || bytes[..] == v2[a..b],
                        "{etag:?} {range:?}: two versions under one OK, {}: {shown:#?}",
                        provenance(&bytes, &v1[a..], &v2[a..])
                    );
                    // The first answer, then the whole range in one request.
                    assert_eq!(log.len(), 2, "{etag:?} {range:?}: {shown:#?}");
                    assert_eq!(
                        log[1].byte_range,
                        Some((got.start, got.end - 1)),
                        "{shown:#?}"
                    );
                }
                Err(error) => panic!("{etag:?} {range:?}: {error} {shown:#?}"),
            }
        }
    }
}

/// Past the bytes a get may hold at once, an object without a strong ETag cannot be read in
/// one request nor pinned: the get fails, saying why, after the first answer alone.
#[test]
fn a_long_read_of_an_object_without_a_strong_etag_fails_clearly() {
    let server = MockServer::start();
    let size = (1 << 20) + 1;
    server.insert_virtual("/big.bin", size);
    server.set_etag("/big.bin", None);
    let client = isolated().set("http.part_size", "64KiB").build().unwrap();
    let store = KaruStore::new(&server.base_url(), &client).unwrap();
    // 8 parts of 64 KiB are held at most: 512 KiB in one request is fine, 1 MiB + 1 is not.
    let (_, bytes) = get_all(&store, "big.bin", Some(GetRange::Bounded(0..512 << 10))).unwrap();
    assert_eq!(bytes[..], pattern(0, 512 << 10)[..]);
    server.take_requests();
    let error = get_all(&store, "big.bin", None)
        .map(|(range, bytes)| (range, bytes.len()))
        .unwrap_err();
    let karu = karu_error(&error);
    assert_eq!(karu.status(), Status::Unsupported, "{error}");
    assert!(karu.message().contains("strong ETag"), "{}", karu.message());
    assert_eq!(server.take_requests().len(), 1);
}

/// 20 MiB with a strong ETag, read with Karu's default part size: the first answer (8 MiB),
/// then the rest in parts carrying its ETag as `If-Match`; replaced after the first answer (a
/// second version with other bytes), the read fails instead of mixing them.
#[test]
fn an_object_over_8_mib_is_read_through_parts_pinned_to_its_first_answer() {
    let size: u64 = 20 << 20;
    let (v1, v2) = (pattern(0, size as usize), pattern(7, size as usize));
    let server = MockServer::start();
    server.insert("/v1", v1.clone());
    server.insert("/v2", v2.clone());
    let store = store(&server);
    // Unchanged: exact bytes, every request after the first pinned.
    support::Versions::install(&server, "/obj", "/v1", "/v2", u64::MAX);
    let (range, bytes) = get_all(&store, "obj", None).unwrap();
    assert_eq!(range, 0..size);
    assert!(bytes[..] == v1[..], "{}", provenance(&bytes, &v1, &v2));
    let log = server.take_requests();
    let shown: Vec<String> = log.iter().map(ToString::to_string).collect();
    assert_eq!(log.len(), 3, "{shown:#?}");
    assert_eq!(log[0].byte_range, Some((0, (8 << 20) - 1)));
    assert_eq!(log[0].header("if-match"), None);
    let etag = block_on(store.head(&Path::from("v1")))
        .unwrap()
        .e_tag
        .unwrap();
    server.take_requests();
    let mut rest: Vec<_> = log[1..].iter().map(|r| r.byte_range.unwrap()).collect();
    rest.sort();
    assert_eq!(
        rest,
        [(8 << 20, (16 << 20) - 1), (16 << 20, size - 1)],
        "{shown:#?}"
    );
    assert!(
        log[1..]
            .iter()
            .all(|r| r.header("if-match") == Some(etag.as_str()) && r.status == 206),
        "{shown:#?}"
    );
    // Replaced after the first answer: the pinned parts are refused (412), the read fails.
    support::Versions::install(&server, "/obj", "/v1", "/v2", 1);
    let error = match get_all(&store, "obj", None) {
        Ok((_, bytes)) => panic!(
            "a replaced object read OK: {}",
            provenance(&bytes, &v1, &v2)
        ),
        Err(e) => e,
    };
    assert!(
        matches!(error, object_store::Error::Precondition { .. }),
        "{error:?}"
    );
    let log = server.take_requests();
    let shown: Vec<String> = log.iter().map(ToString::to_string).collect();
    assert!(
        log[1..]
            .iter()
            .all(|r| r.header("if-match") == Some(etag.as_str()) && r.status == 412),
        "{shown:#?}"
    );
}

/// `if_match` goes out with the first request: a condition that fails costs one request and
/// no body, not a chunk of the object.
#[test]
fn if_match_is_sent_with_the_first_request() {
    let server = MockServer::start();
    server.insert("/big.bin", pattern(0, 20 << 20));
    let store = store(&server);
    let path = Path::from("big.bin");
    let etag = block_on(store.head(&path)).unwrap().e_tag.unwrap();
    server.take_requests();
    for options in [
        GetOptions::new(),
        GetOptions::new().with_range(Some(GetRange::Suffix(100))),
        GetOptions::new().with_range(Some(GetRange::Bounded(5..10))),
        GetOptions::new().with_head(true),
    ] {
        let options = options.with_if_match(Some("\"other\""));
        let error = block_on(store.get_opts(&path, options.clone())).unwrap_err();
        assert!(
            matches!(error, object_store::Error::Precondition { .. }),
            "{options:?}: {error:?}"
        );
        let log = server.take_requests();
        let shown: Vec<String> = log.iter().map(ToString::to_string).collect();
        assert_eq!(log.len(), 1, "{options:?}: {shown:#?}");
        assert_eq!(log[0].header("if-match"), Some("\"other\""), "{shown:#?}");
        // The refusal's small error document, none of the object's bytes.
        assert_eq!(log[0].status, 412, "{shown:#?}");
        assert!(log[0].body_bytes < 1024, "{shown:#?}");
    }
    // A condition that holds: every request of the read carries it (the first the caller's,
    // the others the first answer's ETag, which it matched).
    let options = GetOptions::new().with_if_match(Some(format!("\"other\", {etag}")));
    let bytes = block_on(async { store.get_opts(&path, options).await?.bytes().await }).unwrap();
    assert_eq!(bytes[..], pattern(0, 20 << 20)[..]);
    let log = server.take_requests();
    assert_eq!(log.len(), 3);
    assert_eq!(
        log[0].header("if-match"),
        Some(format!("\"other\", {etag}").as_str())
    );
    assert!(
        log[1..]
            .iter()
            .all(|r| r.header("if-match") == Some(etag.as_str()))
    );
}

/// RFC 9110's If-Match: a list of quoted entity tags (a tag may hold a comma), `*`, strong
/// comparison (a weak tag never matches).
#[test]
fn if_match_compares_entity_tags_as_rfc_9110_says() {
    let server = MockServer::start();
    server.insert("/c", Bytes::from_static(b"comma"));
    server.set_etag("/c", Some("\"a,b\""));
    let store = store(&server);
    let path = Path::from("c");
    let read = |condition: &str| {
        let options = GetOptions::new().with_if_match(Some(condition));
        block_on(async { store.get_opts(&path, options).await?.bytes().await })
    };
    for condition in ["\"a,b\"", "\"x\", \"a,b\"", "\"a,b\",\"y\"", "*"] {
        assert_eq!(
            read(condition).unwrap_or_else(|e| panic!("{condition}: {e}")),
            "comma"
        );
    }
    for condition in ["\"a\"", "\"b\"", "W/\"a,b\"", "\"a\", \"b\""] {
        let error = read(condition).unwrap_err();
        assert!(
            matches!(error, object_store::Error::Precondition { .. }),
            "{condition}: {error:?}"
        );
    }
    // An answer that states no strong ETag cannot prove a tag matched, even when the server
    // ignores the condition.
    server.set_etag("/c", None);
    server.add_fault(FaultRule::new(Fault::IgnoreIfMatch));
    let error = read("\"a,b\"").unwrap_err();
    assert!(
        matches!(error, object_store::Error::Precondition { .. }),
        "{error:?}"
    );
    assert_eq!(read("*").unwrap(), "comma");
}

#[test]
fn if_match_fails_a_changed_object_with_precondition() {
    let server = MockServer::start();
    server.insert("/test", Bytes::from_static(b"foo"));
    let store = store(&server);
    let path = Path::from("test");
    block_on(async {
        let tag = store.head(&path).await.unwrap().e_tag.unwrap();
        let options = GetOptions::new().with_if_match(Some(tag.clone()));
        assert_eq!(
            store
                .get_opts(&path, options)
                .await
                .unwrap()
                .bytes()
                .await
                .unwrap(),
            "foo"
        );
        let options = GetOptions::new().with_if_match(Some("\"invalid\""));
        let err = store.get_opts(&path, options).await.unwrap_err();
        assert!(
            matches!(err, object_store::Error::Precondition { .. }),
            "{err}"
        );

        server.insert("/test", Bytes::from_static(b"test"));
        let new_tag = store.head(&path).await.unwrap().e_tag.unwrap();
        assert_ne!(tag, new_tag);
        let options = GetOptions::new().with_if_match(Some(new_tag));
        assert_eq!(
            store
                .get_opts(&path, options)
                .await
                .unwrap()
                .bytes()
                .await
                .unwrap(),
            "test"
        );
        let options = GetOptions::new().with_if_match(Some(tag));
        let err = store.get_opts(&path, options).await.unwrap_err();
        assert!(
            matches!(err, object_store::Error::Precondition { .. }),
            "{err}"
        );
        // `head: true` is a stat, checked the same way.
        let options = GetOptions::new()
            .with_head(true)
            .with_if_match(Some("\"x\""));
        let err = store.get_opts(&path, options).await.unwrap_err();
        assert!(
            matches!(err, object_store::Error::Precondition { .. }),
            "{err}"
        );
    });
}

/// `head` and `get` report the answer's `Last-Modified` (the mock stamps an object when it is
/// inserted, to the second, as HTTP dates go); an answer without one reports the Unix epoch.
#[test]
fn last_modified_is_the_answers_last_modified() {
    use chrono::{DateTime, Utc};
    let server = MockServer::start();
    let second = |t: DateTime<Utc>| t.timestamp();
    let before = second(Utc::now());
    server.insert("/a", Bytes::from_static(b"abcdef"));
    let after = second(Utc::now());
    let store = store(&server);
    block_on(async {
        let path = Path::from("a");
        let head = store.head(&path).await.unwrap();
        let stamped = second(head.last_modified);
        assert!(
            (before..=after).contains(&stamped),
            "{} not within the insert's second(s) {before}..={after}",
            head.last_modified
        );
        let got = store.get(&path).await.unwrap();
        assert_eq!(got.meta.last_modified, head.last_modified);
        assert_eq!(got.bytes().await.unwrap(), Bytes::from_static(b"abcdef"));
        let options = GetOptions::new().with_range(Some(GetRange::Bounded(2..4)));
        let ranged = store.get_opts(&path, options).await.unwrap();
        assert_eq!(ranged.meta.last_modified, head.last_modified);
    });
}

#[test]
fn options_karu_cannot_honour_are_refused_before_any_request() {
    let server = MockServer::start();
    server.insert("/a", Bytes::from_static(b"abc"));
    let store = store(&server);
    let date = chrono::DateTime::UNIX_EPOCH;
    for options in [
        GetOptions::new().with_if_none_match(Some("\"v\"")),
        GetOptions::new().with_if_modified_since(Some(date)),
        GetOptions::new().with_if_unmodified_since(Some(date)),
        GetOptions::new().with_version(Some("2")),
    ] {
        let err = block_on(store.get_opts(&Path::from("a"), options.clone())).unwrap_err();
        assert!(
            matches!(err, object_store::Error::NotSupported { .. }),
            "{options:?}: {err}"
        );
    }
    assert_eq!(server.request_count(), 0);
}

#[test]
fn the_empty_object() {
    let server = MockServer::start();
    server.insert("/empty", Bytes::new());
    let store = store(&server);
    let path = Path::from("empty");
    block_on(async {
        assert_eq!(store.head(&path).await.unwrap().size, 0);
        let result = store.get(&path).await.unwrap();
        assert_eq!((result.range.clone(), result.meta.size), (0..0, 0));
        assert!(result.bytes().await.unwrap().is_empty());
        let suffix = GetOptions::new().with_range(Some(GetRange::Suffix(5)));
        let result = store.get_opts(&path, suffix).await.unwrap();
        assert_eq!(result.range, 0..0);
        assert!(result.bytes().await.unwrap().is_empty());
        let bounded = GetOptions::new().with_range(Some(0..1));
        assert!(store.get_opts(&path, bounded).await.is_err());
        assert_eq!(
            store.get_ranges(&path, &[0..0, 0..0]).await.unwrap(),
            [Bytes::new(), Bytes::new()]
        );
        assert!(store.get_ranges(&path, &[0..0, 0..1]).await.is_err());
    });
}

#[test]
fn a_missing_object_is_not_found_for_every_read() {
    let server = MockServer::start();
    let store = store(&server);
    let path = Path::from("this_file_should_not_exist");
    block_on(async {
        let errors = [
            store.head(&path).await.unwrap_err(),
            store.get(&path).await.unwrap_err(),
            store.get_range(&path, 0..10).await.unwrap_err(),
            store
                .get_ranges(&path, &[0..10, 100..200])
                .await
                .unwrap_err(),
        ];
        for error in &errors {
            assert!(
                matches!(error, object_store::Error::NotFound { path, .. } if path == "this_file_should_not_exist"),
                "{error:?}"
            );
            assert_eq!(karu_error(error).status(), Status::NotFound);
            assert_eq!(karu_error(error).http_status(), Some(404));
        }
    });
}

#[test]
fn denied_access_keeps_karus_evidence() {
    let server = MockServer::start();
    server.insert("/secret", Bytes::from_static(b"x"));
    server.add_fault(FaultRule::new(Fault::Status {
        code: 403,
        retry_after: None,
    }));
    let store = store(&server);
    let error = block_on(store.get_range(&Path::from("secret"), 0..1)).unwrap_err();
    assert!(
        matches!(error, object_store::Error::PermissionDenied { .. }),
        "{error:?}"
    );
    assert_eq!(karu_error(&error).http_status(), Some(403));
}

/// 8 reads of 4 KiB, 32 KiB apart, at `base`.
fn cluster(base: u64) -> Vec<Range<u64>> {
    (0..8)
        .map(|i| base + i * (36 << 10)..base + i * (36 << 10) + 4096)
        .collect()
}

#[test]
fn get_ranges_is_one_karu_batch_merged_by_karus_planner() {
    let server = MockServer::start();
    let size = 16 << 20;
    server.insert_virtual("/big.bin", size);
    let store = store(&server);
    let mut ranges = cluster(0);
    ranges.extend(cluster(10 << 20));
    ranges.push(5..5); // empty: no read
    ranges.push(size - 100..size + 100); // past the end: what exists
    let got = block_on(store.get_ranges(&Path::from("big.bin"), &ranges)).unwrap();
    for (range, bytes) in ranges.iter().zip(&got) {
        let end = range.end.min(size);
        assert_eq!(
            bytes[..],
            pattern(range.start, (end - range.start) as usize)[..],
            "{range:?}"
        );
    }
    let log = server.requests();
    // Two clusters, one request each; the last range its own.
    assert_eq!(log.len(), 3, "{:#?}", ranges_of(&log));
    let mut asked: Vec<_> = log.iter().map(|r| r.byte_range.unwrap()).collect();
    asked.sort();
    let last = cluster(0).last().unwrap().end - 1;
    assert_eq!(asked[0], (0, last));
    assert_eq!(asked[1], (10 << 20, (10 << 20) + last));
    assert_eq!(asked[2], (size - 100, size + 99));
}

/// `get_ranges` of two clusters far apart (two requests) of an object replaced between them:
/// the read fails instead of returning ranges of two versions.
#[test]
fn get_ranges_returns_ranges_of_one_version() {
    let server = MockServer::start();
    let size = 16 << 20;
    server.insert("/v1", pattern(0, size));
    server.insert("/v2", pattern(7, size));
    support::Versions::install(&server, "/obj", "/v1", "/v2", 1);
    let store = store(&server);
    let mut ranges = cluster(0);
    ranges.extend(cluster(10 << 20));
    let outcome = block_on(store.get_ranges(&Path::from("obj"), &ranges));
    let log = server.requests();
    let shown: Vec<String> = log.iter().map(ToString::to_string).collect();
    assert_eq!(log.len(), 2, "{shown:#?}");
    match outcome {
        Ok(got) => {
            let of = |seed: u64| {
                ranges
                    .iter()
                    .zip(&got)
                    .filter(|(r, b)| b[..] == pattern(seed + r.start, 4096)[..])
                    .count()
            };
            panic!(
                "OK with {} ranges of the first version and {} of the second: {shown:#?}",
                of(0),
                of(7)
            );
        }
        Err(error) => assert!(
            matches!(error, object_store::Error::Precondition { .. }),
            "{error:?}"
        ),
    }
}

#[test]
fn faults_under_get_ranges_leave_exact_bytes() {
    let faults = [
        Fault::CutBodyAfter(1000),
        Fault::Status {
            code: 503,
            retry_after: None,
        },
        Fault::IgnoreRange,
    ];
    for fault in faults {
        let server = MockServer::start();
        server.insert("/o.bin", pattern(0, 1 << 20));
        server.add_fault(FaultRule::new(fault.clone()).times(1));
        let store = store(&server);
        let ranges = cluster(4096);
        let got = block_on(store.get_ranges(&Path::from("o.bin"), &ranges)).unwrap();
        for (range, bytes) in ranges.iter().zip(&got) {
            assert_eq!(bytes[..], pattern(range.start, 4096)[..], "{fault:?}");
        }
        let log = server.requests();
        assert!(
            log[0].fault.is_some(),
            "{fault:?}: the fault met the request"
        );
        let expected = if fault == Fault::IgnoreRange { 1 } else { 2 };
        assert_eq!(log.len(), expected, "{fault:?}: {:#?}", ranges_of(&log));
    }
}

#[test]
fn names_reach_the_object_karu_read_reaches() {
    let server = MockServer::start();
    let names = [
        "dir/a b+c%d é.bin",
        "dir/plus+equals=amp&.bin",
        "dir/ünï çødé#?.bin",
    ];
    for (k, name) in names.iter().enumerate() {
        server.insert(&url_path(name), pattern(k as u64, 100));
    }
    let store = store(&server);
    for (k, name) in names.iter().enumerate() {
        let bytes = block_on(store.get_range(&Path::from(*name), 10..20)).unwrap();
        assert_eq!(bytes[..], pattern(k as u64 + 10, 10)[..], "{name}");
        let address = store.address(Path::from(*name)).unwrap();
        let client = store.client();
        let object = client.locate(&address).unwrap();
        assert_eq!(
            client.read(&object, 10, 10).unwrap(),
            pattern(k as u64 + 10, 10)
        );
    }
    // `..` never leaves the base.
    let error = block_on(store.get_range(&Path::from_iter(["dir", ".."]), 0..1)).unwrap_err();
    assert_eq!(karu_error(&error).status(), Status::InvalidArgument);
}

#[test]
fn paths_that_would_leave_the_base_are_refused_before_any_request() {
    let server = MockServer::start();
    server.insert("/secret.txt", Bytes::from_static(b"secret"));
    server.insert("/sub/ok.txt", Bytes::from_static(b"fine"));
    let store = KaruStore::new(&server.url("/sub"), &isolated().build().unwrap()).unwrap();
    for path in support::escaping_paths() {
        let messages = support::refused_everywhere(&store, &path);
        assert_eq!(
            server.request_count(),
            0,
            "{path}: {:#?}",
            server.requests()
        );
        // The call alone failed: the store reads on.
        assert_eq!(
            block_on(store.get_range(&Path::from("ok.txt"), 0..4)).unwrap(),
            "fine",
            "{path}: {messages:?}"
        );
        assert_eq!(server.take_requests().len(), 1);
    }
}

#[test]
fn keys_with_reserved_characters_read_exactly_the_object_they_name() {
    let server = MockServer::start();
    for (name, decoy) in support::RESERVED_NAMES {
        server.insert(&url_path(name), support::content_of(name));
        server.insert(&url_path(decoy), support::content_of(decoy));
    }
    let store = store(&server);
    for (name, decoy) in support::RESERVED_NAMES {
        let path = Path::from_iter([name]);
        let got = block_on(async { store.get(&path).await?.bytes().await })
            .unwrap_or_else(|e| panic!("{name:?} (beside {decoy:?}): {e}"));
        assert_eq!(
            got,
            support::content_of(name),
            "{name:?} (beside {decoy:?})"
        );
        let got = block_on(store.get_range(&path, 1..5)).unwrap();
        assert_eq!(got, support::content_of(name).slice(1..5), "{name:?}");
    }
    // Every request asked for the name as the testkit's own encoder spells it.
    let asked: Vec<String> = server.requests().into_iter().map(|r| r.path).collect();
    for (name, _) in support::RESERVED_NAMES {
        assert_eq!(
            asked.iter().filter(|p| **p == url_path(name)).count(),
            2,
            "{name:?}: {asked:#?}"
        );
    }
}

#[test]
fn writes_deletes_copies_and_listings_are_not_implemented() {
    let server = MockServer::start();
    server.insert("/a", Bytes::from_static(b"abc"));
    let store = store(&server);
    let (a, b) = (Path::from("a"), Path::from("b"));
    let errors = block_on(async {
        vec![
            (
                "put_opts",
                store.put(&a, PutPayload::from_static(b"x")).await.err(),
            ),
            ("put_multipart_opts", store.put_multipart(&a).await.err()),
            ("delete_stream", store.delete(&a).await.err()),
            ("list", store.list(None).next().await.and_then(Result::err)),
            (
                "list_with_offset",
                store
                    .list_with_offset(None, &a)
                    .next()
                    .await
                    .and_then(Result::err),
            ),
            (
                "list_with_delimiter",
                store.list_with_delimiter(None).await.err(),
            ),
            ("copy_opts", store.copy(&a, &b).await.err()),
            ("rename_opts", store.rename(&a, &b).await.err()),
        ]
    });
    for (operation, error) in errors {
        match error {
            Some(object_store::Error::NotImplemented {
                operation: named,
                implementer,
            }) => {
                assert!(named.starts_with(operation), "{operation}: {named}");
                assert_eq!(implementer, "KaruStore");
            }
            other => panic!("{operation}: {other:?}"),
        }
    }
    assert_eq!(server.request_count(), 0);
    // The store still reads.
    assert_eq!(block_on(store.get_range(&a, 0..3)).unwrap(), "abc");
}

#[test]
fn a_base_karu_cannot_join_under_is_refused() {
    let client = isolated().build().unwrap();
    for base in [
        "",
        "https://host/dir?sig=secret",
        "https://user:pw@host/dir",
        "nosuch://b/p",
    ] {
        let error = KaruStore::new(base, &client).unwrap_err();
        assert!(
            matches!(
                error.status(),
                Status::InvalidArgument | Status::Unsupported
            ),
            "{base}: {error:?}"
        );
    }
}
