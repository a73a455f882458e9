//! The C ABI from C and C++: programs in tests/c compiled with the system compilers under
//! AddressSanitizer and LeakSanitizer against include/karu.h (include/karu.hpp) and the
//! `libkaru.so` of this build, run against files and mock servers made here; each program
//! checks the bytes and statuses it gets, and these tests check the servers' request logs.

mod support;

use karu_testkit::MockServer;
use support::{Lang, assert_success, compile, pattern, pattern_file};

const MIB: u64 = 1 << 20;

#[test]
fn local_and_http_reads_from_c() {
    let dir = tempfile::tempdir().unwrap();
    let file = pattern_file(dir.path(), "local.bin", MIB);
    let server = MockServer::start();
    server.insert("/object", pattern(0, MIB));
    let program = compile(Lang::C, &["tests/c/reads.c"]);
    let output = program.run(&[
        file.to_str().unwrap(),
        &server.url("/object"),
        &server.url("/missing"),
    ]);
    assert_success(&output);

    // Every request the program's reads made, once each: the stat probe, the two merged
    // neighbours as one range, the overridden ones as two, the pinned reads (each with its
    // condition), and both ends in one round trip (the head and a suffix range).
    let requests = server.requests();
    let ranges_of = |path: &str| -> Vec<(String, Option<String>)> {
        let mut ranges: Vec<_> = requests
            .iter()
            .filter(|r| r.path == path)
            .map(|r| {
                let range = r.range.clone().unwrap_or_default();
                (range, r.header("if-match").map(str::to_owned))
            })
            .collect();
        ranges.sort();
        ranges
    };
    let object = ranges_of("/object");
    let plain = |r: &str| (r.to_owned(), None);
    let pinned_etag = object
        .iter()
        .find(|(r, _)| r == "bytes=500000-500015")
        .and_then(|(_, m)| m.clone())
        .expect("the pinned read carried the stat's ETag");
    assert!(pinned_etag.starts_with('"'), "{pinned_etag}");
    assert_eq!(
        object,
        [
            plain("bytes=-32"),
            plain("bytes=0-0"),
            plain("bytes=0-15"),
            plain("bytes=100-249"),
            plain("bytes=300000-300009"),
            plain("bytes=300010-300019"),
            ("bytes=500000-500015".into(), Some(pinned_etag)),
            (
                "bytes=600000-600007".into(),
                Some("\"another-version\"".into())
            ),
        ]
    );
    assert_eq!(
        ranges_of("/missing"),
        [plain("bytes=0-0"), plain("bytes=0-9")]
    );
}
