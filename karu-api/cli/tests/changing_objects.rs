//! `karu read` of an object that changes between requests returns the bytes of one version or
//! fails, never an OK read of two: the mock gives its object a new version before every answer
//! ([`Fault::ChangeContent`] on every request), whose bytes differ from the others' at every
//! offset, so bytes of two versions in one read would show.

mod support;

use std::time::Duration;

use karu_testkit::{Fault, FaultRule, MockServer, pattern, pattern_version, version_of_pattern};
use serde_json::json;
use support::{karu, sha256};

const SIZE: u64 = 1 << 20;
const PIECE: u64 = 64 << 10;

/// Pieces of 64 KiB, so a read of the whole object could take sixteen requests; no duplicate
/// requests, so the log holds exactly what the command asked for.
const FLAGS: [&str; 4] = [
    "--set",
    "http.part_size=64KiB",
    "--set",
    "hedge.enabled=false",
];

fn args<'a>(command: &[&'a str]) -> Vec<&'a str> {
    let mut args = FLAGS.to_vec();
    args.extend_from_slice(command);
    args
}

/// A server whose object `/o` is served with `etag` (`None`: no ETag header; a weak tag stays
/// as it is; a strong one is replaced with each version), and answers its `n`-th request (from
/// 1) from version `n`.
fn changing_server(etag: Option<&str>) -> (MockServer, String) {
    let server = MockServer::start();
    server.insert("/o", pattern(0, SIZE as usize));
    server.set_etag("/o", etag);
    server.add_fault(FaultRule::new(Fault::ChangeContent).path("/o"));
    let url = server.url("/o");
    (server, url)
}

/// The ranges the server was asked for, in order.
fn ranges(server: &MockServer) -> Vec<Option<(u64, u64)>> {
    server.requests().iter().map(|r| r.byte_range).collect()
}

#[test]
fn an_object_without_a_strong_etag_is_read_as_one_version() {
    for etag in [None, Some("W/\"same\"")] {
        // To stdout.
        let (server, url) = changing_server(etag);
        let home = tempfile::tempdir().unwrap();
        let out = karu(home.path(), args(&["read", &url, "0:1MiB"]));
        assert_eq!((out.code, out.stderr.as_str()), (0, ""), "{etag:?}");
        assert_eq!(out.stdout.len() as u64, SIZE);
        // The stat, the first piece (whose answer names no version, so no other piece is
        // asked for), then the whole range in one request: the version its bytes are of.
        assert_eq!(
            ranges(&server),
            [Some((0, 0)), Some((0, PIECE - 1)), Some((0, SIZE - 1))],
            "{etag:?}"
        );
        assert_eq!(
            version_of_pattern(&out.stdout, 0),
            Some(3),
            "{etag:?}: one version, the last request's"
        );

        // To a file, and as JSON, from an offset, to the end of the object.
        let (server, url) = changing_server(etag);
        let out_dir = home.path().join("out");
        let out = karu(
            home.path(),
            args(&[
                "--json",
                "read",
                &url,
                "100:end",
                "--output",
                out_dir.to_str().unwrap(),
            ]),
        );
        assert_eq!(out.code, 0, "{etag:?}: {out:?}");
        let written = std::fs::read(out_dir.join("0.bin")).unwrap();
        assert_eq!(written.len() as u64, SIZE - 100);
        let version = version_of_pattern(&written, 100);
        assert_eq!(version, Some(3), "{etag:?}: {:?}", ranges(&server));
        assert_eq!(out.json_lines()[0]["sha256"], json!(sha256(&written)));

        // The whole range's answer cut short: it is asked for again from its start (no tag
        // to resume it by), and every byte is of that answer's version.
        let (server, url) = changing_server(etag);
        server.add_fault(
            FaultRule::new(Fault::CutBodyAfter(300 << 10))
                .skip(2)
                .times(1),
        );
        let out = karu(home.path(), args(&["read", &url, "0:1MiB"]));
        assert_eq!((out.code, out.stderr.as_str()), (0, ""), "{etag:?}");
        assert_eq!(
            ranges(&server),
            [
                Some((0, 0)),
                Some((0, PIECE - 1)),
                Some((0, SIZE - 1)),
                Some((0, SIZE - 1))
            ],
            "{etag:?}"
        );
        assert_eq!(version_of_pattern(&out.stdout, 0), Some(4));
    }
}

#[test]
fn an_object_whose_strong_etag_changes_fails_instead_of_mixing() {
    let (server, url) = changing_server(Some("\"v0\""));
    let home = tempfile::tempdir().unwrap();
    let out = karu(home.path(), args(&["read", &url, "0:1MiB"]));
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr
            .starts_with("karu: read 0 (0:1048576): precondition_failed: "),
        "{out:?}"
    );
    // Pinned to the stat's version, every piece was refused: nothing was written.
    assert!(out.stdout.is_empty(), "{} bytes", out.stdout.len());
    // Every piece asked for the stat's version, which no later answer was.
    let log = server.requests();
    assert_eq!(log[0].header("if-match"), None);
    let pinned = log[1].header("if-match");
    assert!(pinned.is_some_and(|tag| tag != "\"v0\""), "{log:?}");
    assert!(
        log[1..]
            .iter()
            .all(|r| r.header("if-match") == pinned && !(200..300).contains(&r.status)),
        "{log:?}"
    );
}

/// A local file of 1 MiB read to a pipe in pieces of 64 KiB, four at a time, that the test
/// changes with `change` once the first piece reached the pipe: the pipe (64 KiB) is full then,
/// so the command waits to write the second piece, and no piece after the fifth was read yet.
fn local_read_changed_midway(change: impl FnOnce(&std::path::Path)) -> support::Run {
    use std::io::Read as _;
    use std::process::{Command, Stdio};

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("data.bin");
    std::fs::write(&file, pattern(0, SIZE as usize)).unwrap();
    // A modification time long past, so that a write now is seen as one.
    std::fs::File::options()
        .write(true)
        .open(&file)
        .unwrap()
        .set_modified(std::time::UNIX_EPOCH + Duration::from_secs(1_000_000))
        .unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_karu"));
    support::isolate(&mut command, dir.path())
        .args([
            "--set",
            "http.part_size=64KiB",
            "--set",
            "planner.max_span=256KiB",
            "read",
            file.to_str().unwrap(),
            "0:1MiB",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 1];
    stdout.read_exact(&mut first).unwrap();
    change(&file);
    let mut rest = Vec::new();
    stdout.read_to_end(&mut rest).unwrap();
    let output = child.wait_with_output().unwrap();
    let mut bytes = first.to_vec();
    bytes.extend(rest);
    support::Run {
        code: output.status.code().unwrap(),
        stdout: bytes,
        stderr: String::from_utf8(output.stderr).unwrap(),
    }
}

#[test]
fn a_local_file_changed_during_a_read_fails_it() {
    // Replaced by a rename, as editors and `karu --output` write files.
    let out = local_read_changed_midway(|file| {
        let new = file.with_file_name("new.bin");
        std::fs::write(&new, pattern_version(1, 0, SIZE as usize)).unwrap();
        std::fs::rename(&new, file).unwrap();
    });
    assert_eq!(out.code, 1, "{:?}", out.stderr);
    assert!(
        out.stderr
            .starts_with("karu: read 0 (0:1048576): precondition_failed: ")
            && out.stderr.contains(" changed while it was read"),
        "{:?}",
        out.stderr
    );
    assert!(out.stdout.len() < SIZE as usize);
    assert_eq!(
        version_of_pattern(&out.stdout, 0),
        Some(0),
        "a prefix of one version"
    );

    // Rewritten in place.
    let out = local_read_changed_midway(|file| {
        use std::io::{Seek as _, SeekFrom, Write as _};
        let mut f = std::fs::File::options().write(true).open(file).unwrap();
        f.seek(SeekFrom::Start(SIZE / 2)).unwrap();
        f.write_all(&pattern_version(1, SIZE / 2, (SIZE / 2) as usize))
            .unwrap();
    });
    assert_eq!(out.code, 1, "{:?}", out.stderr);
    assert!(
        out.stderr.contains(" changed while it was read"),
        "{:?}",
        out.stderr
    );
    assert_eq!(version_of_pattern(&out.stdout, 0), Some(0));
}
