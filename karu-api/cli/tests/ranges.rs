//! Ranges as people write them (`7:end`, `7:`, `-500`, binary units, decimal units refused
//! with one message) and addresses that are not addresses (an unknown scheme, a misspelt one,
//! an invalid bucket): usage errors, status 2, with a did-you-mean for schemes.

mod support;

use karu_testkit::MockServer;
use serde_json::json;
use support::{karu, pattern, pattern_file, sha256};

#[test]
fn ranges_to_the_end_and_suffixes_read_what_they_say() {
    let dir = tempfile::tempdir().unwrap();
    let file = pattern_file(dir.path(), "24.bin", 24);
    for (range, expected) in [
        ("7:end", pattern(7, 17)),
        ("7:", pattern(7, 17)),
        ("-5", pattern(19, 5)),
        ("-500", pattern(0, 24)),
        ("24:end", Vec::new()),
        ("0x10:end", pattern(16, 8)),
    ] {
        let out = karu(dir.path(), ["read", &file, range]);
        assert_eq!((out.code, out.stderr.as_str()), (0, ""), "{range}");
        assert_eq!(out.stdout, expected, "{range}");
    }
    // Starting past the end: a range error of that read, nothing delivered.
    let out = karu(dir.path(), ["read", &file, "30:end"]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
    assert!(
        out.stderr
            .starts_with("karu: read 0 (30:end): range_not_satisfiable: "),
        "{out:?}"
    );
    // In a window, the end is the window's.
    let out = karu(dir.path(), ["--window", "2:10", "read", &file, "-3"]);
    assert_eq!((out.code, out.stdout), (0, pattern(9, 3)));
    // With the other ranges of a batch, and in JSON with the range as written.
    let out = karu(
        dir.path(),
        ["--json", "read", &file, "0:2", "20:end", "-1", "-2"],
    );
    assert_eq!((out.code, out.stderr.as_str()), (0, ""), "{out:?}");
    let mut lines = out.json_lines();
    lines[..4].sort_by_key(|l| l["tag"].as_u64());
    let placed: Vec<_> = lines[..4]
        .iter()
        .map(|l| {
            (
                l["range"].clone(),
                l["offset"].clone(),
                l["length"].clone(),
                l["sha256"].clone(),
            )
        })
        .collect();
    let expect = |range: &str, offset: u64, length: u64| {
        (
            json!(range),
            json!(offset),
            json!(length),
            json!(sha256(&pattern(offset, length))),
        )
    };
    assert_eq!(
        placed,
        [
            expect("0:2", 0, 2),
            expect("20:end", 20, 4),
            expect("-1", 23, 1),
            expect("-2", 22, 2),
        ]
    );
    // A device states no size: there is no end to read to.
    let out = karu(dir.path(), ["read", "/dev/zero", "0:end"]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr
            .starts_with("karu: read 0 (0:end): unsupported: "),
        "{out:?}"
    );
}

#[test]
fn a_remote_range_to_the_end_is_placed_by_a_stat_and_pinned_to_its_version() {
    let server = MockServer::start();
    server.insert_virtual("/obj.bin", 1000);
    server.set_etag("/obj.bin", Some("\"v1\""));
    let url = server.url("/obj.bin");
    let home = tempfile::tempdir().unwrap();
    let out = karu(home.path(), ["read", &url, "-100"]);
    assert_eq!((out.code, out.stderr.as_str()), (0, ""));
    assert_eq!(out.stdout, karu_testkit::pattern(900, 100));
    let out = karu(home.path(), ["read", &url, "990:end"]);
    assert_eq!((out.code, out.stdout), (0, karu_testkit::pattern(990, 10)));
    let log: Vec<_> = server
        .requests()
        .iter()
        .map(|r| (r.byte_range, r.header("if-match").map(str::to_owned)))
        .collect();
    let pinned = Some("\"v1\"".to_owned());
    assert_eq!(
        log,
        [
            (Some((0, 0)), None),
            (Some((900, 999)), pinned.clone()),
            (Some((0, 0)), None),
            (Some((990, 999)), pinned),
        ],
        "one stat each, then the range pinned to the version it was placed in"
    );
}

#[test]
fn units_are_binary_and_decimal_ones_are_refused_alike() {
    let dir = tempfile::tempdir().unwrap();
    let file = pattern_file(dir.path(), "8k.bin", 8192);
    for (range, offset, length) in [
        ("1K:1k", 1024, 1024),
        ("0:4k", 0, 4096),
        ("1KiB:2K", 1024, 2048),
        ("0x100:1K", 256, 1024),
    ] {
        let out = karu(dir.path(), ["read", &file, range]);
        assert_eq!((out.code, out.stderr.as_str()), (0, ""), "{range}");
        assert_eq!(out.stdout, pattern(offset, length), "{range}");
    }
    let out = karu(dir.path(), ["read", &file, "0:10", "--max-gap", "1M"]);
    assert_eq!(out.code, 0, "{out:?}");
    for (args, text) in [
        (vec!["read", &file, "0:1kb"], "1kb"),
        (vec!["read", &file, "0:1KB"], "1KB"),
        (vec!["read", &file, "1MB:1"], "1MB"),
        (vec!["read", &file, "0:1", "--max-span", "64MB"], "64MB"),
        (vec!["--window", "1kB:end", "read", &file, "0:1"], "1kB"),
    ] {
        let out = karu(dir.path(), &args);
        assert_eq!(out.code, 2, "{args:?}: {out:?}");
        assert!(out.stdout.is_empty(), "{args:?}");
        assert!(
            out.stderr.contains(&format!(
                "{text:?}: decimal units are not taken on the command line"
            )),
            "{args:?}: {out:?}"
        );
    }
}

#[test]
fn a_bad_address_is_a_usage_error_with_a_did_you_mean() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    for (address, says) in [
        (
            "htp://127.0.0.1/x.bin",
            "unknown scheme \"htp\" (karu reads ",
        ),
        ("s4://bucket/key", "unknown scheme \"s4\""),
        ("gopher://host/x", "unknown scheme \"gopher\""),
        ("s3://Not_A_Bucket/key", "invalid_argument: "),
    ] {
        for args in [
            vec!["read", address, "0:4"],
            vec!["stat", address],
            vec!["ends", address, "1", "1"],
            vec!["config", address],
        ] {
            let out = karu(home, &args);
            assert_eq!(out.code, 2, "{args:?}: {out:?}");
            assert!(out.stdout.is_empty(), "{args:?}: {out:?}");
            let errors = out.stderr_lines();
            assert_eq!(errors.len(), 1, "{args:?}: {errors:?}");
            assert!(
                errors[0].starts_with(&format!("karu: {address}: ")) && errors[0].contains(says),
                "{args:?}: {errors:?}"
            );
        }
    }
    let suggestion = |address: &str| {
        let out = karu(home, ["stat", address]);
        out.stderr
            .split_once("did you mean ")
            .map(|(_, rest)| rest.trim_end().to_owned())
    };
    assert_eq!(
        suggestion("htp://127.0.0.1/x.bin").as_deref(),
        Some("\"http://127.0.0.1/x.bin\"?")
    );
    assert_eq!(
        suggestion("S4://bucket/key").as_deref(),
        Some("\"s3://bucket/key\"?")
    );
    assert_eq!(suggestion("gopher://host/x"), None);
    // What the address holds after `?` (a signature) is not repeated.
    let out = karu(home, ["stat", "htps://h/x?sig=SECRET"]);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(!out.stderr.contains("SECRET"), "{out:?}");
    assert!(
        out.stderr
            .contains("did you mean \"https://h/x?<redacted>\"?"),
        "{out:?}"
    );
    // A window that cannot be is a usage error too.
    let dir = tempfile::tempdir().unwrap();
    let file = pattern_file(dir.path(), "a.bin", 10);
    let out = karu(
        dir.path(),
        ["--window", "18446744073709551615:2", "stat", &file],
    );
    assert_eq!(out.code, 2, "{out:?}");
}
