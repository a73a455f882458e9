//! Client configuration: an immutable snapshot, layer precedence, errors naming source and key.

mod support;

use std::time::Duration;

use karu::{Next, Read, Status};
use support::{
    LeaseGuard, expect_completion, held_file, isolated, locate, pattern, pattern_file,
    wait_until_active,
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
    let held = client.submit([Read::new(&locate(&client, &held_path), 0, 8)]);
    let _guard = LeaseGuard(lease.clone());
    wait_until_active(&held, 1);
    let waiting = client.submit([Read::new(&locate(&client, &data), 0, 10)]);
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
