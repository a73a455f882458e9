//! Caller-chosen lengths never abort the command: `karu ends` with a 1 TiB (or `u64::MAX`)
//! head or tail clamps both ends to the object's size, and `karu read` of 8 GB or 1 TiB of a
//! small remote object delivers what exists, as a range error with its prefix. The summary
//! counts the bytes fetched for ranges, never an error body, and prints times without float
//! noise.

mod support;

use karu_testkit::{MockServer, pattern};
use serde_json::json;
use support::{karu, sha256};

const SIZE: u64 = 100_000;

fn server() -> (MockServer, String) {
    let server = MockServer::start();
    server.insert_virtual("/obj.bin", SIZE);
    let url = server.url("/obj.bin");
    (server, url)
}

#[test]
fn ends_with_huge_lengths_clamps_both_ends_to_the_object() {
    let (server, url) = server();
    let home = tempfile::tempdir().unwrap();
    for (head, tail) in [
        ("1099511627776", "16"),
        ("18446744073709551615", "18446744073709551615"),
    ] {
        let out = karu(home.path(), ["--json", "ends", &url, head, tail]);
        assert_eq!((out.code, out.stderr.as_str()), (0, ""), "{out:?}");
        let lines = out.json_lines();
        assert_eq!(lines.len(), 1, "{lines:?}");
        let line = &lines[0];
        let tail_len = tail.parse::<u64>().unwrap().min(SIZE);
        assert_eq!(line["size"], json!(SIZE));
        assert_eq!(line["head_bytes"], json!(SIZE));
        assert_eq!(
            line["head_sha256"],
            json!(sha256(&pattern(0, SIZE as usize)))
        );
        assert_eq!(line["tail_bytes"], json!(tail_len));
        assert_eq!(
            line["tail_sha256"],
            json!(sha256(&pattern(SIZE - tail_len, tail_len as usize)))
        );
    }
    assert_eq!(server.request_count(), 4, "a head and a suffix each time");
}

#[test]
fn reads_far_beyond_a_remote_object_deliver_the_prefix_that_exists() {
    let (server, url) = server();
    let home = tempfile::tempdir().unwrap();
    let out = karu(
        home.path(),
        [
            "--json",
            "read",
            &url,
            "0:8000000000",
            "1000:1099511627776",
            "5:5",
        ],
    );
    assert_eq!(out.code, 1, "{out:?}");
    let mut lines = out.json_lines();
    assert_eq!(lines.len(), 4, "{lines:?}");
    lines[..3].sort_by_key(|line| line["tag"].as_u64());
    let prefix = |start: u64| {
        json!({
            "status": "range_not_satisfiable",
            "bytes_received": SIZE - start,
            "sha256": sha256(&pattern(start, (SIZE - start) as usize)),
        })
    };
    for (line, (tag, expected)) in lines.iter().zip([
        (0, prefix(0)),
        (1, prefix(1000)),
        (
            2,
            json!({
                "status": "ok",
                "bytes_received": 5,
                "sha256": sha256(&pattern(5, 5)),
            }),
        ),
    ]) {
        assert_eq!(line["tag"], json!(tag), "{line}");
        for key in ["status", "bytes_received", "sha256"] {
            assert_eq!(line[key], expected[key], "{key} of {line}");
        }
        // Each read went out in a request of its own, answered at once.
        let timing = &line["timing"];
        assert_eq!(timing["attempts"], 1, "{line}");
        assert!(timing["transfer"].as_u64().is_some(), "{line}");
        let first = timing["first_byte_ms"].as_f64().expect("a first byte");
        assert!(first <= timing["done_ms"].as_f64().unwrap(), "{line}");
    }
    let errors = out.stderr_lines();
    assert_eq!(errors.len(), 3, "two errors and the summary: {errors:?}");
    assert!(
        errors
            .iter()
            .any(|e| e.starts_with("karu: read 0 ")
                && e.ends_with(&format!("({SIZE} bytes delivered)"))),
        "{errors:?}"
    );
    // The summary counts what was delivered and fetched, not what was planned.
    let batch = &lines[3]["batch"];
    let delivered = 2 * SIZE - 1000 + 5;
    assert_eq!(batch["delivered_bytes"], json!(delivered));
    assert_eq!(batch["transport"]["requests"], json!(4));
    assert_eq!(batch["fetched_bytes"], json!(delivered));
    // The two long reads learn the size and ETag from one stat of the object, then each asks
    // for one piece (8 MiB, `http.part_size`), which the object ends in: no piece past it.
    let mut ranges: Vec<_> = server.requests().iter().map(|r| r.byte_range).collect();
    ranges.sort_unstable();
    let piece = 8 << 20;
    assert_eq!(
        ranges,
        [
            Some((0, 0)),
            Some((0, piece - 1)),
            Some((5, 9)),
            Some((1000, 1000 + piece - 1))
        ]
    );
}

#[test]
fn fetched_bytes_count_ranges_not_error_bodies() {
    let (server, url) = server();
    let home = tempfile::tempdir().unwrap();
    // 8 bytes planned past the end: the server answers 416, with a body.
    let out = karu(home.path(), ["--json", "read", &url, "200000:8", "0:10"]);
    assert_eq!(out.code, 1, "{out:?}");
    let lines = out.json_lines();
    let batch = &lines[2]["batch"];
    assert_eq!(batch["planned_bytes"], json!(18));
    assert_eq!(batch["delivered_bytes"], json!(10));
    assert_eq!(batch["fetched_bytes"], json!(10), "{batch}");
    let log = server.requests();
    let refused = log.iter().find(|r| r.status == 416).expect("a 416");
    assert!(refused.body_bytes > 0, "the 416 had a body: {refused:?}");
    assert_eq!(
        batch["transport"]["body_bytes"],
        json!(10 + refused.body_bytes),
        "the transport counts every body byte it received"
    );
}

#[test]
fn times_are_printed_to_the_microsecond() {
    let (_server, url) = server();
    let home = tempfile::tempdir().unwrap();
    let out = karu(
        home.path(),
        ["--json", "read", &url, "0:10", "20:10", "90000:5"],
    );
    assert_eq!(out.code, 0, "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let mut seen = 0;
    for (at, _) in text.match_indices("_ms\":") {
        let number: String = text[at + 5..]
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == 'e' || *c == '-')
            .collect();
        if number.is_empty() {
            continue; // null, or an object of quantiles
        }
        seen += 1;
        let decimals = number.split_once('.').map_or(0, |(_, f)| f.len());
        assert!(decimals <= 3 && !number.contains('e'), "{number} in {text}");
    }
    assert!(seen >= 7, "{seen} times in {text}");
}
