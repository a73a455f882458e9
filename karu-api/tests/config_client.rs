//! Client configuration: an immutable snapshot, layer precedence, errors naming source and key.

mod support;

use std::time::Duration;

use karu::{Next, Read, Status};
use karu_testkit::{Fault, FaultRule};
use support::{
    LeaseGuard, expect_completion, held_file, isolated, locate_file, pattern, pattern_file,
    wait_until_held,
};

/// Build, expecting an error; returns its message after checking its status.
#[track_caller]
fn build_error(builder: &karu::ClientBuilder) -> String {
    let err = builder.build().expect_err("the configuration is malformed");
    assert_eq!(err.status(), Status::InvalidArgument, "{err}");
    err.message().to_string()
}

#[track_caller]
fn assert_mentions(message: &str, parts: &[&str]) {
    for part in parts {
        assert!(
            message.contains(part),
            "{message:?} does not mention {part:?}"
        );
    }
}

/// How the client's planner splits two reads of a remote object 8 bytes apart (the engine
/// plans with the limits of the client's snapshot).
fn transfers_for_two_reads_8_bytes_apart(client: &karu::Client) -> usize {
    let server = karu_testkit::MockServer::start();
    server.insert("/o", pattern(0, 64));
    let object = client.locate(&server.url("/o")).unwrap();
    let batch = client.submit([Read::new(&object, 0, 8), Read::new(&object, 16, 8)]);
    let transfers = batch.stats().transfers;
    assert!(batch.wait().iter().all(|c| c.is_ok()));
    transfers
}

#[test]
fn a_client_keeps_the_snapshot_it_was_built_with() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("karu.toml");
    std::fs::write(&file, "file_workers = 2\n[planner]\nmax_gap = \"64KiB\"\n").unwrap();

    let builder = isolated()
        .project_config_file(Some(file.clone()))
        .io_threads(3);
    let first = builder.build().unwrap();
    let second = builder.build().unwrap();

    // Change the builder and the file; clients already built keep what they captured.
    let builder = builder.io_threads(5).set("planner.max_gap", 0);
    std::fs::write(&file, "file_workers = 7\n").unwrap();
    let third = builder.build().unwrap();

    for client in [&first, &second] {
        let settings = client.snapshot().global();
        assert_eq!(settings.io_threads, 3);
        assert_eq!(settings.file_workers, 2);
        assert_eq!(settings.planner.max_gap.0, 64 << 10);
        assert_eq!(transfers_for_two_reads_8_bytes_apart(client), 1, "merged");
    }
    let settings = third.snapshot().global();
    assert_eq!(
        (
            settings.io_threads,
            settings.file_workers,
            settings.planner.max_gap.0
        ),
        (5, 7, 0)
    );
    assert_eq!(
        transfers_for_two_reads_8_bytes_apart(&third),
        2,
        "not merged"
    );
    assert_eq!(first.snapshot().global().file_workers, 2, "unchanged");
}

#[test]
fn a_malformed_explicit_option_names_the_key_and_the_expected_type() {
    let message = build_error(&isolated().set("io_threads", "many"));
    assert_mentions(
        &message,
        &[
            "explicit option",
            "\"io_threads\"",
            "expected a non-negative integer",
            "\"many\"",
        ],
    );
    let message = build_error(&isolated().file_workers(0));
    assert_mentions(
        &message,
        &["explicit option", "\"file_workers\"", "expected at least 1"],
    );
}

#[test]
fn a_malformed_environment_variable_names_the_variable() {
    let message = build_error(&isolated().environment([("KARU_IO_THREADS", "many")]));
    assert_mentions(
        &message,
        &[
            "environment variable KARU_IO_THREADS",
            "\"io_threads\"",
            "expected a non-negative integer",
            "\"many\"",
        ],
    );
    let message = build_error(&isolated().environment([("KARU_PLANNER__MAX_GAP", "lots")]));
    assert_mentions(
        &message,
        &[
            "environment variable KARU_PLANNER__MAX_GAP",
            "\"planner.max_gap\"",
            "expected a byte size",
        ],
    );
}

#[test]
fn a_malformed_file_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("karu.toml");
    std::fs::write(&file, "[planner]\nmax_gap = \"lots\"\n").unwrap();
    let name = file.to_str().unwrap();
    let expected = [
        name,
        "\"planner.max_gap\"",
        "expected a byte size",
        "\"lots\"",
    ];

    // The same file as the project file, an added file and the file KARU_CONFIG names.
    let message = build_error(&isolated().project_config_file(Some(file.clone())));
    assert_mentions(&message, &expected);
    let message = build_error(&isolated().config_file(&file));
    assert_mentions(&message, &expected);
    let message = build_error(&isolated().environment([("KARU_CONFIG", name)]));
    assert_mentions(&message, &expected);

    // Invalid TOML names the file and the line.
    std::fs::write(&file, "io_threads = 2\n[planner\n").unwrap();
    let message = build_error(&isolated().config_file(&file));
    assert_mentions(&message, &[name, "line 2"]);

    // An added file must exist.
    let missing = dir.path().join("missing.toml");
    let message = build_error(&isolated().config_file(&missing));
    assert_mentions(&message, &[missing.to_str().unwrap(), "not found"]);
}

#[test]
fn file_workers_from_the_environment_are_honoured() {
    let dir = tempfile::tempdir().unwrap();
    let (held_path, lease) = held_file(dir.path(), "held.bin", 100);
    let data = pattern_file(dir.path(), "data.bin", 100);
    let client = isolated()
        .environment([("KARU_FILE_WORKERS", "1")])
        .build()
        .unwrap();
    assert_eq!(client.snapshot().global().file_workers, 1);

    // With one worker held on a leased file, a read of another file cannot run until it is
    // free.
    let held = client.submit([Read::new(&locate_file(&client, &held_path), 0, 8)]);
    let _guard = LeaseGuard(lease.clone());
    wait_until_held(&held, &lease);
    let waiting = client.submit([Read::new(&locate_file(&client, &data), 0, 10)]);
    assert!(matches!(
        waiting.next_timeout(Duration::from_millis(50)),
        Next::TimedOut
    ));
    lease.release();
    let c = expect_completion(&waiting);
    assert_eq!(c.bytes(), pattern(0, 10));
    let c = expect_completion(&held);
    assert_eq!((c.status(), c.bytes()), (Status::Ok, &pattern(0, 8)[..]));
}

#[test]
fn layers_override_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("karu.toml");
    std::fs::write(&file, "file_workers = 2\nio_threads = 2\nconcurrency = 2\n").unwrap();
    let env = [("KARU_FILE_WORKERS", "1"), ("KARU_IO_THREADS", "6")];

    let client = isolated()
        .project_config_file(Some(file))
        .environment(env)
        .file_workers(3)
        .build()
        .unwrap();
    let settings = client.snapshot().global();
    assert_eq!(
        settings.file_workers, 3,
        "an explicit option beats the environment"
    );
    assert_eq!(settings.io_threads, 6, "the environment beats a file");
    assert_eq!(settings.concurrency, 2, "a file beats the default");
    assert_eq!(settings.credential_workers, 4, "the default");

    // An empty variable counts as unset.
    let client = isolated()
        .environment([("KARU_FILE_WORKERS", "")])
        .build()
        .unwrap();
    assert_eq!(client.snapshot().global().file_workers, 4);
}

/// The range and status of each request the server logged since the last call.
fn ranges_and_statuses(server: &karu_testkit::MockServer) -> Vec<(Option<(u64, u64)>, u16)> {
    let log = server.take_requests();
    log.iter().map(|r| (r.byte_range, r.status)).collect()
}

/// The duration settings that bound a read, its connections and its body.
const LIMITS: [&str; 4] = [
    "retry.deadline",
    "http.connect_timeout",
    "http.low_speed_time",
    "http.dns_ttl",
];

/// A duration setting takes any number of seconds up to `u64::MAX`, more than any clock
/// holds: Karu counts such a wait as 100 years ("no practical limit"). A read under such
/// limits, through a retried status and a body cut short, delivers its exact bytes; its
/// client's loops stay up for the next read.
#[test]
fn durations_as_long_as_a_u64_holds_are_no_practical_limit() {
    let server = karu_testkit::MockServer::start();
    server.insert("/o", pattern(0, 100_000));
    let mut builder = isolated()
        .set("retry.initial_backoff", "1ms")
        .set("retry.max_backoff", "1ms");
    for key in LIMITS {
        builder = builder.set(key, u64::MAX);
    }
    let client = builder.build().unwrap();
    let settings = client.snapshot().global();
    for value in [
        settings.retry.deadline,
        settings.http.connect_timeout,
        settings.http.low_speed_time,
        settings.http.dns_ttl,
    ] {
        assert_eq!(value.0, Duration::from_secs(u64::MAX));
    }
    let object = client.locate(&server.url("/o")).unwrap();
    for round in 0..2 {
        server.add_fault(
            FaultRule::new(Fault::Status {
                code: 503,
                retry_after: None,
            })
            .times(1),
        );
        server.add_fault(FaultRule::new(Fault::CutBodyAfter(30_000)).skip(1).times(1));
        let done = client.submit([Read::new(&object, 1_000, 90_000)]).wait();
        assert_eq!(
            done[0].status(),
            Status::Ok,
            "round {round}: {:?}",
            done[0].error()
        );
        assert_eq!(
            done[0].bytes(),
            &pattern(1_000, 90_000)[..],
            "round {round}"
        );
        assert_eq!(
            ranges_and_statuses(&server),
            [
                (Some((1_000, 90_999)), 503),
                (Some((1_000, 90_999)), 206),
                (Some((31_000, 90_999)), 206),
            ],
            "round {round}: retried, then resumed after the cut"
        );
    }
}

/// A wait between attempts longer than the clock holds cannot end before the read's deadline:
/// the read fails at once as out of time, after its one request, and the next read works.
#[test]
fn a_backoff_longer_than_the_clock_holds_ends_the_read_at_its_deadline() {
    let server = karu_testkit::MockServer::start();
    server.insert("/o", pattern(0, 1_000));
    for deadline in [Some(u64::MAX), None] {
        let mut builder = isolated()
            .set("retry.initial_backoff", u64::MAX)
            .set("retry.max_backoff", u64::MAX);
        if let Some(deadline) = deadline {
            builder = builder.set("retry.deadline", deadline);
        }
        let client = builder.build().unwrap();
        let object = client.locate(&server.url("/o")).unwrap();
        server.add_fault(
            FaultRule::new(Fault::Status {
                code: 503,
                retry_after: None,
            })
            .times(1),
        );
        let done = client
            .submit([Read::new(&object, 10, 100), Read::new(&object, 900, 100)])
            .wait();
        for c in &done {
            assert_eq!(c.status(), Status::Http);
            let message = c.error().unwrap().to_string();
            assert!(
                message.contains("injected status 503")
                    && message.contains("the read's deadline left no time for attempt 2"),
                "{message}"
            );
        }
        assert_eq!(
            ranges_and_statuses(&server),
            [(Some((10, 999)), 503)],
            "one request, no retry"
        );

        let done = client.submit([Read::new(&object, 10, 100)]).wait();
        assert_eq!(done[0].status(), Status::Ok, "{:?}", done[0].error());
        assert_eq!(done[0].bytes(), &pattern(10, 100)[..]);
        assert_eq!(server.take_requests().len(), 1);
    }
}

/// Every numeric setting at each end of its range, under each kind of fault a client rides out
/// (and a missing object): the reads of an HTTP object and a local file end exactly as with
/// the defaults. Guards every piece of arithmetic on a setting against overflow and division
/// by its smallest value.
#[test]
fn every_setting_at_the_ends_of_its_range_reads_exact_bytes() {
    let max = u64::MAX;
    let max32 = u64::from(u32::MAX);
    let settings: &[(&str, u64)] = &[
        ("io_threads", 1),
        ("io_threads", 256),
        ("file_workers", 1),
        ("file_workers", 1024),
        ("credential_workers", 1),
        ("concurrency", 1),
        ("concurrency", 65_536),
        ("planner.max_gap", 0),
        ("planner.max_gap", max),
        ("planner.max_span", 1),
        ("planner.max_span", max),
        ("planner.max_parts", 1),
        ("planner.max_parts", max32),
        ("planner.max_amplification", 1),
        ("planner.max_amplification", max32),
        ("http.fallback_limit", 0),
        ("http.fallback_limit", max),
        ("http.drain_limit", 0),
        ("http.drain_limit", max),
        ("http.error_body_limit", 0),
        ("http.error_body_limit", max),
        ("http.part_size", 0),
        ("http.part_size", 64 << 10),
        ("http.part_size", max),
        ("http.fast_connection", 0),
        ("http.fast_connection", max),
        ("http.low_speed_limit", 0),
        ("http.low_speed_limit", max),
        ("http.low_speed_time", 0),
        ("http.low_speed_time", max),
        ("http.dns_ttl", 0),
        ("http.dns_ttl", max),
        ("http.connect_timeout", max),
        ("retry.attempts", max32),
        ("retry.connect_attempts", 1),
        ("retry.connect_attempts", max32),
        ("retry.deadline", max),
        ("retry.initial_backoff", 0),
        ("retry.max_backoff", 0),
    ];
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.bin");
    std::fs::write(&path, pattern(0, 100_000)).unwrap();
    // Each fault, and whether it makes the object missing.
    let status = |code| Fault::Status {
        code,
        retry_after: None,
    };
    let faults = [
        (None, false),
        (Some(FaultRule::new(Fault::IgnoreRange).times(1)), false),
        (Some(FaultRule::new(status(500)).times(1)), false),
        (
            Some(FaultRule::new(Fault::CutBodyAfter(5_000)).times(1)),
            false,
        ),
        (Some(FaultRule::new(status(404))), true),
    ];
    for &(key, value) in settings {
        let client = isolated()
            .set("retry.initial_backoff", "1ms")
            .set("retry.max_backoff", "1ms")
            .set(key, value)
            .build()
            .unwrap_or_else(|e| panic!("{key} = {value}: {e}"));
        let file = client.locate(path.to_str().unwrap()).unwrap();
        for (fault, missing) in &faults {
            let server = karu_testkit::MockServer::start();
            server.insert("/o", pattern(0, 100_000));
            if let Some(rule) = fault {
                server.add_fault(rule.clone());
            }
            let object = client.locate(&server.url("/o")).unwrap();
            let reads = [
                (&object, 0, 8),
                (&object, 50_000, 40_000),
                (&object, 99_990, 100),
                (&file, 0, 8),
                (&file, 99_990, 100),
            ];
            let done = client
                .submit(
                    reads
                        .iter()
                        .map(|&(o, offset, len)| Read::new(o, offset, len)),
                )
                .wait();
            for (i, (c, &(o, offset, len))) in done.iter().zip(&reads).enumerate() {
                let remote = std::ptr::eq(o, &object);
                let (status, bytes) = if remote && *missing {
                    (Status::NotFound, vec![])
                } else if offset + len > 100_000 {
                    (
                        Status::RangeNotSatisfiable,
                        pattern(offset, (100_000 - offset) as usize),
                    )
                } else {
                    (Status::Ok, pattern(offset, len as usize))
                };
                let what = format!("{key} = {value}, fault {fault:?}, read {i}");
                assert_eq!(c.status(), status, "{what}: {:?}", c.error());
                assert_eq!(c.bytes(), &bytes[..], "{what}");
            }
            // Only the reads' span was asked for (the last read runs past the object's end).
            let log = server.requests();
            assert!(!log.is_empty(), "{key} = {value}, fault {fault:?}");
            for r in &log {
                let (first, last) = r.byte_range.unwrap();
                assert!(first <= last && last < 100_090, "{key} = {value}: {r}");
            }
        }
    }
}

/// Every provider's endpoint settings follow one rule: an http(s) URL with a host that a path
/// can follow, so user information, a query or a fragment is refused when the client is
/// built, naming the key and why, and quoting the value with its secrets redacted. A path
/// (a proxy's prefix) and a trailing `/` are fine.
#[test]
fn endpoints_a_path_cannot_follow_are_refused_naming_the_key_without_their_secrets() {
    let keys = [
        "s3.endpoint",
        "gcs.endpoint",
        "azure.endpoint",
        "azure.authority_host",
        "azure.msi_endpoint",
        "hf.endpoint",
        "source.endpoint",
    ];
    let refused = [
        ("https://user:hunter2@store.example", "has user information"),
        ("https://:hunter2@store.example/", "has user information"),
        (
            "https://store.example/?sig=hunter2",
            "has a query or fragment",
        ),
        ("https://store.example/p#hunter2", "has a query or fragment"),
        ("store.example/hunter2", "is not a URL"),
        ("ftp://store.example/hunter2", "is not an http or https URL"),
    ];
    for key in keys {
        for (value, why) in refused {
            if key == "gcs.endpoint" && !value.contains("://") {
                continue; // a bare host[:port], as STORAGE_EMULATOR_HOST is often set
            }
            let message = build_error(&isolated().set(key, value));
            assert_mentions(&message, &[&format!("key \"{key}\""), why]);
            if value.contains('@') || value.contains(['?', '#']) {
                assert!(!message.contains("hunter2"), "{message}");
            }
        }
        for fine in ["http://127.0.0.1:9/", "https://proxy.example/prefix/"] {
            isolated()
                .set(key, fine)
                .build()
                .unwrap_or_else(|e| panic!("{key} = {fine}: {e}"));
        }
    }
}
