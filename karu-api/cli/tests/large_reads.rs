//! Long reads stream: a read longer than `http.part_size` goes in pieces of that size, pinned
//! to one version by the ETag of a stat, written in order as they arrive, with no more pieces
//! in flight than the in-flight bound (`planner.max_span`) holds. Here the pieces are 64 KiB
//! and the bound 256 KiB, so at most four pieces are in flight, and a piece that never comes
//! does not keep the pieces before it from reaching stdout.

mod support;

use std::io::Read as _;
use std::process::{Command, Stdio};

use karu_testkit::{Fault, FaultRule, MockServer};
use serde_json::json;
use support::{isolate, karu, pattern, pattern_file, sha256};

const PIECE: u64 = 64 << 10;
const SIZE: u64 = 4 << 20;

/// The flags that make pieces of 64 KiB, four at a time.
const SMALL_PIECES: [&str; 4] = [
    "--set",
    "http.part_size=64KiB",
    "--set",
    "planner.max_span=256KiB",
];

fn args<'a>(command: &[&'a str]) -> Vec<&'a str> {
    let mut args = SMALL_PIECES.to_vec();
    args.extend_from_slice(command);
    args
}

#[test]
fn a_long_remote_read_goes_in_pinned_pieces_within_the_bound() {
    let server = MockServer::start();
    server.insert_virtual("/big.bin", SIZE);
    server.set_etag("/big.bin", Some("\"v7\""));
    let url = server.url("/big.bin");
    let home = tempfile::tempdir().unwrap();

    let out = karu(home.path(), args(&["read", &url, "0:4MiB"]));
    assert_eq!((out.code, out.stderr.as_str()), (0, ""));
    assert!(
        out.stdout == karu_testkit::pattern(0, SIZE as usize),
        "exact bytes, in order"
    );
    let log = server.take_requests();
    assert_eq!(log[0].byte_range, Some((0, 0)), "the stat comes first");
    assert_eq!(log[0].header("if-match"), None);
    let mut pieces: Vec<(u64, u64)> = log[1..]
        .iter()
        .map(|r| {
            assert_eq!(r.header("if-match"), Some("\"v7\""), "pinned: {r:?}");
            assert_eq!(r.status, 206);
            r.byte_range.unwrap()
        })
        .collect();
    pieces.sort_unstable();
    let expected: Vec<(u64, u64)> = (0..SIZE / PIECE)
        .map(|i| (i * PIECE, (i + 1) * PIECE - 1))
        .collect();
    assert_eq!(pieces, expected, "each piece once");
    assert!(
        server.max_in_flight() <= 4,
        "{} pieces in flight",
        server.max_in_flight()
    );

    // As JSON: one line for the read, its pieces counted (without hedging: the server's log
    // counts them too).
    let out = karu(
        home.path(),
        args(&[
            "--json",
            "--set",
            "hedge.enabled=false",
            "read",
            &url,
            "4096:2MiB",
        ]),
    );
    assert_eq!((out.code, out.stderr.as_str()), (0, ""));
    let lines = out.json_lines();
    assert_eq!(lines.len(), 2, "{lines:?}");
    let line = &lines[0];
    assert_eq!(
        (&line["status"], &line["bytes_received"], &line["sha256"]),
        (
            &json!("ok"),
            &json!(2 << 20),
            &json!(sha256(&karu_testkit::pattern(4096, 2 << 20)))
        )
    );
    assert_eq!(line["timing"]["pieces"], json!(32));
    assert_eq!(line["timing"]["attempts"], json!(32));
    let batch = &lines[1]["batch"];
    assert_eq!(batch["transfers"], json!(32));
    assert_eq!(batch["fetched_bytes"], json!(2 << 20));
    // A stat and the pieces.
    karu_testkit::reads::assert_requests(&server.take_requests(), 33);
    assert_eq!(batch["transport"]["requests"], json!(33));
    assert_eq!(batch["transport"]["hedges"], json!(0));

    // To a file: whole, under its name, nothing else left behind.
    let dir = tempfile::tempdir().unwrap();
    let out = karu(
        home.path(),
        args(&[
            "read",
            &url,
            "100:1MiB",
            "--output",
            dir.path().to_str().unwrap(),
        ]),
    );
    assert_eq!((out.code, out.stderr.as_str()), (0, ""));
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["0.bin"]);
    assert!(
        std::fs::read(dir.path().join("0.bin")).unwrap() == karu_testkit::pattern(100, 1 << 20)
    );
}

#[test]
fn a_long_read_past_the_end_asks_for_one_piece_past_what_exists() {
    let server = MockServer::start();
    server.insert_virtual("/small.bin", 200 << 10);
    let url = server.url("/small.bin");
    let home = tempfile::tempdir().unwrap();
    let out = karu(home.path(), args(&["read", &url, "0:1MiB"]));
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stdout == karu_testkit::pattern(0, 200 << 10),
        "what exists"
    );
    assert!(
        out.stderr
            .starts_with("karu: read 0 (0:1048576): range_not_satisfiable: "),
        "{out:?}"
    );
    assert!(out.stderr.contains("(204800 bytes delivered)"), "{out:?}");
    let mut ranges: Vec<_> = server.requests().iter().map(|r| r.byte_range).collect();
    ranges.sort_unstable();
    assert_eq!(
        ranges,
        [
            Some((0, 0)),
            Some((0, PIECE - 1)),
            Some((PIECE, 2 * PIECE - 1)),
            Some((2 * PIECE, 3 * PIECE - 1)),
            Some((3 * PIECE, 4 * PIECE - 1)),
        ],
        "the stat, and the four pieces that hold the 200 KiB"
    );
}

#[test]
fn a_long_local_read_goes_in_pieces_too() {
    let dir = tempfile::tempdir().unwrap();
    let file = pattern_file(dir.path(), "big.bin", 1 << 20);
    let out = karu(dir.path(), args(&["read", &file, "10:end"]));
    assert_eq!((out.code, out.stderr.as_str()), (0, ""));
    assert!(out.stdout == pattern(10, (1 << 20) - 10));
    let out = karu(dir.path(), args(&["--json", "read", &file, "0:600K"]));
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.json_lines()[0]["timing"]["pieces"], json!(10));
    assert_eq!(
        out.json_lines()[0]["sha256"],
        json!(sha256(&pattern(0, 600 << 10)))
    );
}

#[test]
fn pieces_reach_stdout_while_a_later_one_is_still_coming() {
    let server = MockServer::start();
    server.insert_virtual("/big.bin", SIZE);
    // The stat and nine pieces are answered; the tenth piece asked for never is.
    server.add_fault(
        FaultRule::new(Fault::NeverAnswer)
            .path("/big.bin")
            .skip(10)
            .times(1),
    );
    let url = server.url("/big.bin");
    let home = tempfile::tempdir().unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_karu"));
    isolate(&mut command, home.path())
        .args(args(&[
            "--set",
            "retry.deadline=60s",
            "read",
            &url,
            "0:4MiB",
        ]))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().unwrap();
    let mut stdout = child.stdout.take().unwrap();

    // When the tenth piece was asked for, at most three others were in flight, so the six
    // pieces before them had been written, in order: they arrive while the read goes on.
    let mut first = vec![0u8; 6 * PIECE as usize];
    stdout.read_exact(&mut first).unwrap();
    assert!(first == karu_testkit::pattern(0, first.len()), "in order");
    assert_eq!(child.try_wait().unwrap(), None, "the read is still going");

    // The server goes away: the piece fails, and with it the read; what came before stays.
    drop(server);
    let mut rest = Vec::new();
    stdout.read_to_end(&mut rest).unwrap();
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    first.extend(rest);
    assert!(first.len() < SIZE as usize);
    assert!(first == karu_testkit::pattern(0, first.len()), "a prefix");
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.starts_with("karu: read 0 (0:4194304): "), "{stderr}");
    assert!(
        stderr.contains(&format!("({} bytes delivered)", first.len())),
        "{stderr}"
    );
}
