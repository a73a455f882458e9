//! The C ABI from C and C++: programs in tests/c compiled with the system compilers under
//! AddressSanitizer and LeakSanitizer against include/karu.h (include/karu.hpp) and the
//! `libkaru.so` of this build, run against files and mock servers made here; each program
//! checks the bytes and statuses it gets, and these tests check the servers' request logs.

mod support;

use std::time::Duration;

use karu_testkit::{Fault, FaultRule, MockServer, Rng};
use support::{
    Lang, assert_success, assert_success_in, compile, compile_forking, pattern, pattern_file,
};

const MIB: u64 = 1 << 20;

/// Now, in seconds since the Unix epoch.
fn unix_seconds() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("a clock after 1970")
        .as_secs_f64()
}

#[test]
fn local_and_http_reads_from_c() {
    let dir = tempfile::tempdir().unwrap();
    let file = pattern_file(dir.path(), "local.bin", MIB);
    let server = MockServer::start();
    // The mock states the time an object was stored as its Last-Modified (whole seconds).
    let before = unix_seconds();
    server.insert("/object", pattern(0, MIB));
    let after = unix_seconds();
    let program = compile(Lang::C, &["tests/c/reads.c"]);
    let output = program.run(&[
        file.to_str().unwrap(),
        &server.url("/object"),
        &server.url("/missing"),
    ]);
    assert_success(&output);
    // The program checked the local file's time against stat(2) itself; the remote object's
    // is the mock's Last-Modified.
    let stdout = String::from_utf8_lossy(&output.stdout);
    let remote_modified: u64 = stdout
        .lines()
        .find_map(|line| line.strip_prefix("remote_last_modified="))
        .and_then(|seconds| seconds.parse().ok())
        .unwrap_or_else(|| panic!("no remote_last_modified in: {stdout}"));
    assert!(
        (before.floor()..=after).contains(&(remote_modified as f64)),
        "the mock stored the object between {before} and {after}, not at {remote_modified}"
    );

    // Every request the program's reads made, once each: the stat probes (of the object and of
    // a window of it, and of the missing object and a window of it), the two merged
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
        [plain("bytes=0-0"), plain("bytes=0-0"), plain("bytes=0-9")]
    );
}

#[test]
fn many_threads_drain_one_batch_from_c() {
    let dir = tempfile::tempdir().unwrap();
    let file = pattern_file(dir.path(), "local.bin", MIB);
    let server = MockServer::start();
    server.insert("/object", pattern(0, MIB));
    let program = compile(Lang::C, &["tests/c/threads.c"]);
    // Without hedging (the program's client reads the environment): every request counted.
    let child = program
        .command(&[file.to_str().unwrap(), &server.url("/object")])
        .env("KARU_HEDGE__ENABLED", "false")
        .spawn()
        .expect("the program starts");
    let output = support::wait(child);
    assert_success(&output);
    // One request per planned remote transfer, none lost, none repeated.
    let stdout = String::from_utf8_lossy(&output.stdout);
    let (transfers, hedges): (usize, u64) = stdout
        .trim()
        .strip_prefix("remote_transfers=")
        .and_then(|rest| rest.split_once(" hedges="))
        .and_then(|(t, h)| Some((t.parse().ok()?, h.parse().ok()?)))
        .unwrap_or_else(|| panic!("unexpected output: {stdout}"));
    let requests = server.requests();
    karu_testkit::reads::assert_requests(&requests, transfers);
    assert_eq!(hedges, 0);
    assert!(requests.iter().all(|r| r.status == 206), "{requests:?}");
    let mut ranges: Vec<_> = requests.iter().map(|r| r.byte_range).collect();
    ranges.sort_unstable();
    ranges.dedup();
    assert_eq!(ranges.len(), transfers, "a range was requested twice");
}

/// A "KREC" container (see tests/c/reader.c): the pattern as records, then an index of
/// `records` (offset, length) pairs, then the trailer.
fn krec(body_len: u64, records: &[(u64, u64)]) -> Vec<u8> {
    let mut bytes = pattern(0, body_len);
    let index = bytes.len() as u64;
    for (offset, len) in records {
        bytes.extend_from_slice(&offset.to_le_bytes());
        bytes.extend_from_slice(&len.to_le_bytes());
    }
    bytes.extend_from_slice(&index.to_le_bytes());
    bytes.extend_from_slice(&(records.len() as u32).to_le_bytes());
    bytes.extend_from_slice(b"KREC");
    bytes
}

#[test]
fn the_reader_vtable_drives_a_sans_io_reader_from_c() {
    const BODY: u64 = 100_000;
    // Three records of the body; the fourth runs past the end of the file.
    let size = BODY + 4 * 16 + 16;
    let records = [(10, 100), (5000, 2048), (99_000, 1000), (size - 4, 100)];
    let container = krec(BODY, &records);
    assert_eq!(container.len() as u64, size);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("container.krec");
    std::fs::write(&file, &container).unwrap();
    let server = MockServer::start();
    server.insert("/container.krec", container);
    let program = compile(Lang::C, &["tests/c/reader.c"]);
    let output = program.run(&[file.to_str().unwrap(), &server.url("/container.krec")]);
    assert_success(&output);
    // Over HTTP the core's ranges, and only those, were requested: the open's probe, the
    // trailer, the index, each record, and the 4 bytes of the last one that exist.
    let mut ranges: Vec<_> = server
        .requests()
        .iter()
        .map(|r| r.byte_range.expect("closed ranges only"))
        .collect();
    ranges.sort_unstable();
    let mut expected = vec![
        (0, 0),
        (size - 16, size - 1),
        (BODY, BODY + 4 * 16 - 1),
        (10, 109),
        (5000, 7047),
        (99_000, 99_999),
        (size - 4, size - 1),
    ];
    expected.sort_unstable();
    assert_eq!(ranges, expected);
}

#[test]
fn a_credential_callback_in_c_signs_s3_reads() {
    let s3 = karu_testkit::S3Mock::start();
    s3.create_bucket("bucket");
    s3.add_credentials(karu_testkit::MockCredentials::new(
        "AKIDCALLBACK",
        "callback-secret",
    ));
    s3.insert("bucket", "a", pattern(0, 64 << 10));
    s3.insert("bucket", "b", pattern(0, 64 << 10));
    let program = compile(Lang::C, &["tests/c/credentials.c"]);
    let output = program.run(&[&s3.endpoint(), "bucket"]);
    assert_success(&output);
    // Every request of the first client was signed with the callback's key pair, and the
    // mock verified each signature; the refusing callback's read sent no request at all.
    assert!(
        s3.signature_failures().is_empty(),
        "{:?}",
        s3.signature_failures()
    );
    let requests = s3.server().requests();
    assert_eq!(requests.len(), 6, "{requests:?}");
    for request in &requests {
        let authorization = request.header("authorization").unwrap_or_default();
        assert!(
            authorization.contains("Credential=AKIDCALLBACK/"),
            "{authorization}"
        );
        assert_eq!(request.status, 206);
    }
}

#[test]
fn bearer_token_callbacks_in_c_authenticate_gcs_azure_and_hf_reads() {
    use karu_testkit::azure::{AzureMock, Identity};
    use karu_testkit::gcs::GcsMock;
    use karu_testkit::hf::{HfMock, RepoAccess};

    let gcs = GcsMock::start();
    gcs.add_token("ya29.from-c", "user:c-callback");
    let azure = AzureMock::start();
    let azure_token = azure.issue_token("c-callback", Duration::from_secs(3600));
    let hf = HfMock::start();
    hf.add_token("hf_from_c");
    hf.create_repo("org/model", RepoAccess::Gated(vec!["hf_from_c".into()]));
    for name in ["a", "b"] {
        gcs.insert("bkt", name, pattern(0, 64 << 10));
        azure.insert("data", name, pattern(0, 64 << 10));
        hf.insert("org/model", "main", name, pattern(0, 64 << 10));
    }
    let s3 = karu_testkit::S3Mock::start();
    s3.create_bucket("bucket");
    s3.insert("bucket", "a", pattern(0, 64 << 10));
    let program = compile(Lang::C, &["tests/c/tokens.c"]);
    let output = program.run(&[
        &gcs.endpoint(),
        "ya29.from-c",
        &azure.endpoint(),
        azure.account(),
        &azure_token,
        &hf.endpoint(),
        "hf_from_c",
        &s3.endpoint(),
    ]);
    assert_success(&output);
    // Every request carried the callback's token, and each mock accepted it; the refused
    // callbacks (a token for S3, a key pair for GCS) sent nothing.
    let gcs_identities: Vec<String> = gcs
        .authenticated()
        .into_iter()
        .map(|a| a.identity)
        .collect();
    assert!(!gcs_identities.is_empty());
    assert!(
        gcs_identities.iter().all(|i| i == "user:c-callback"),
        "{gcs_identities:?}"
    );
    for request in gcs.server().requests() {
        assert_eq!(request.header("authorization"), Some("Bearer ya29.from-c"));
    }
    let azure_log = azure.take_auth_log();
    assert!(!azure_log.is_empty());
    let bearer = Identity::Bearer {
        identity: "c-callback".into(),
    };
    assert!(
        azure_log
            .iter()
            .all(|r| r.identity == bearer && r.failure.is_none()),
        "{azure_log:?}"
    );
    let hub = hf.hub().requests();
    assert!(!hub.is_empty());
    for request in &hub {
        assert_eq!(request.header("authorization"), Some("Bearer hf_from_c"));
    }
    assert_eq!(hf.authorization_leaks(), 0);
    assert_eq!(s3.server().request_count(), 0);
}

/// Lets every request through, telling the test when one for `path` arrives.
#[derive(Debug)]
struct Arrivals {
    path: &'static str,
    arrived: std::sync::mpsc::Sender<()>,
}

impl karu_testkit::Gate for Arrivals {
    fn check(&self, request: &karu_testkit::RequestHead) -> Option<karu_testkit::GateResponse> {
        if request.path == self.path {
            let _ = self.arrived.send(());
        }
        None
    }
}

#[test]
fn fork_from_c_the_child_reads_on_its_own_and_an_inherited_batch_is_invalid() {
    use std::io::Write as _;
    use std::sync::Arc;

    let dir = tempfile::tempdir().unwrap();
    let file = pattern_file(dir.path(), "local.bin", MIB);
    let server = MockServer::start();
    server.insert("/object", pattern(0, MIB));
    server.insert("/held", pattern(0, 4096));
    // The parent's in-flight read of /held is held until a second request for it arrives,
    // which the parent sends once its children are done.
    server.add_fault(karu_testkit::FaultRule::new(karu_testkit::Fault::Barrier(2)).path("/held"));
    let (arrived, held_arrived) = std::sync::mpsc::channel();
    server.set_gate(Some(Arc::new(Arrivals {
        path: "/held",
        arrived,
    })));
    let program = compile_forking(Lang::C, &["tests/c/fork.c"]);
    let mut command = program.command(&[
        file.to_str().unwrap(),
        &server.url("/object"),
        &server.url("/held"),
    ]);
    let mut child = command
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("the program starts");
    held_arrived
        .recv_timeout(support::PATIENCE)
        .expect("the parent's held read reached the server");
    let accepted_before_fork = server.connections_accepted();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"fork\n").unwrap();
    drop(stdin);
    let output = support::wait(child);
    assert_success(&output);

    // The child (ranges from 1000) and the grandchild (from 2000) read through connections of
    // their own, accepted after the fork: never the parent's, nor each other's.
    let requests = server.requests();
    let connections_from = |at: u64| -> Vec<u64> {
        requests
            .iter()
            .filter(|r| r.path == "/object")
            .filter(|r| {
                r.byte_range
                    .is_some_and(|(first, _)| first == at || first == at + 100_000)
            })
            .map(|r| r.connection)
            .collect()
    };
    let (child, grandchild) = (connections_from(1000), connections_from(2000));
    assert_eq!((child.len(), grandchild.len()), (2, 2), "{requests:?}");
    assert!(
        child
            .iter()
            .chain(&grandchild)
            .all(|&c| c > accepted_before_fork),
        "a child used a parent's connection: {child:?} {grandchild:?} (parent's: 1..={accepted_before_fork})"
    );
    assert!(child.iter().all(|c| !grandchild.contains(c)));
    // The parent's held read was answered once, in the parent, with its releasing request.
    let held: Vec<_> = requests.iter().filter(|r| r.path == "/held").collect();
    assert_eq!(held.len(), 2, "{held:?}");
}

/// The C++ facade over local and HTTP objects, in one C++ standard.
fn the_cpp_facade(standard: &'static str) {
    let dir = tempfile::tempdir().unwrap();
    let file = pattern_file(dir.path(), "local.bin", MIB);
    let server = MockServer::start();
    server.insert("/object", pattern(0, MIB));
    let s3 = karu_testkit::S3Mock::start();
    s3.create_bucket("bucket");
    s3.add_credentials(karu_testkit::MockCredentials::new(
        "AKIDFACADE",
        "facade-secret",
    ));
    s3.insert("bucket", "a", pattern(0, 64 << 10));
    let gcs = karu_testkit::gcs::GcsMock::start();
    gcs.add_token("ya29.facade", "user:facade");
    gcs.insert("bkt", "a", pattern(0, 64 << 10));
    gcs.insert("bkt", "b", pattern(0, 64 << 10));
    let program = compile(Lang::Cpp(standard), &["tests/cpp/facade.cpp"]);
    let output = program.run(&[
        file.to_str().unwrap(),
        &server.url("/object"),
        &server.url("/missing"),
        &s3.endpoint(),
        "bucket",
        &gcs.endpoint(),
    ]);
    assert_success(&output);
    // The token callback's bearer token authenticated both GCS reads.
    let gcs_identities: Vec<String> = gcs
        .authenticated()
        .into_iter()
        .map(|a| a.identity)
        .collect();
    assert_eq!(gcs_identities, ["user:facade"; 2]);
    // The answering callback's key pair signed both S3 reads (each verified by the mock); the
    // throwing callback's read sent nothing.
    assert!(
        s3.signature_failures().is_empty(),
        "{:?}",
        s3.signature_failures()
    );
    let s3_ranges: Vec<_> = s3
        .server()
        .requests()
        .iter()
        .map(|r| {
            let authorization = r.header("authorization").unwrap_or_default();
            assert!(
                authorization.contains("Credential=AKIDFACADE/"),
                "{authorization}"
            );
            (r.status, r.byte_range)
        })
        .collect();
    assert_eq!(s3_ranges.len(), 2, "{s3_ranges:?}");
    assert!(s3_ranges.contains(&(206, Some((0, 99)))), "{s3_ranges:?}");
    assert!(
        s3_ranges.contains(&(206, Some((60000, 60099)))),
        "{s3_ranges:?}"
    );
    // The facade's reads are the C ABI's: merged neighbours as one request, the overridden
    // pair as two, the pinned read with its condition, the reader's probe and reads.
    let mut ranges: Vec<String> = server
        .requests()
        .iter()
        .filter(|r| r.path == "/object")
        .map(|r| r.range.clone().unwrap_or_default())
        .collect();
    ranges.sort();
    assert_eq!(
        ranges,
        [
            "bytes=-32",
            "bytes=0-0",
            "bytes=0-0",
            "bytes=0-15",
            "bytes=0-3",
            "bytes=100-249",
            "bytes=1048568-1048575",
            "bytes=300000-300009",
            "bytes=300010-300019",
            "bytes=400000-400007",
            "bytes=700000-700063",
        ]
    );
}

#[test]
fn the_cpp_facade_as_cpp17() {
    the_cpp_facade("c++17");
}

#[test]
fn the_cpp_facade_as_cpp20() {
    the_cpp_facade("c++20");
}

#[test]
fn the_cpp_facade_as_cpp23() {
    the_cpp_facade("c++23");
}

/// `karu::Client::create().value()` as the README writes it, with a misspelled `KARU_*`
/// variable (the client's build fails): compiled with exceptions, `value()` throws the
/// `karu::Error` (status and message; uncaught, std::terminate shows its message); compiled
/// with `-fno-exceptions`, it prints status and message to stderr and aborts.
fn value_of_a_failed_create(standard: &'static str) {
    let run = |program: &support::Program, mode: &str| {
        let mut command = program.command(&[mode]);
        command.env("KARU_CONCURENCY", "3");
        support::wait(command.spawn().expect("the program starts"))
    };
    let aborted = |output: &std::process::Output| {
        use std::os::unix::process::ExitStatusExt as _;
        output.status.signal() == Some(libc::SIGABRT)
    };

    let with_exceptions = compile(Lang::Cpp(standard), &["tests/cpp/value.cpp"]);
    let caught = run(&with_exceptions, "caught");
    assert_success(&caught);
    let stdout = String::from_utf8_lossy(&caught.stdout).into_owned();
    let (status, message) = stdout
        .trim_end()
        .split_once('\n')
        .unwrap_or_else(|| panic!("unexpected output: {stdout}"));
    assert_eq!(status, "caught invalid_argument");
    // The message is the C ABI's own for this build (the builder's last error): it names the
    // variable, so the user sees which one.
    assert!(message.contains("KARU_CONCURENCY"), "{message}");
    let stderr_of =
        |output: &std::process::Output| String::from_utf8_lossy(&output.stderr).into_owned();

    let uncaught = run(&with_exceptions, "uncaught");
    assert!(aborted(&uncaught), "{uncaught:?}");
    assert!(stderr_of(&uncaught).contains(message), "{uncaught:?}");

    let without = support::compile_with(
        Lang::Cpp(standard),
        &["tests/cpp/value.cpp"],
        &["-fno-exceptions"],
    );
    let output = run(&without, "uncaught");
    assert!(aborted(&output), "{output:?}");
    assert!(output.stdout.is_empty(), "{output:?}");
    let stderr = stderr_of(&output);
    assert!(
        stderr.contains(&format!(": invalid_argument: {message}")),
        "{stderr}"
    );
    // Without exceptions there is nothing to catch: that mode is not built.
    assert_eq!(run(&without, "caught").status.code(), Some(2));
}

#[test]
fn value_of_a_failed_create_throws_or_says_why_it_aborts_cpp17() {
    value_of_a_failed_create("c++17");
}

#[test]
fn value_of_a_failed_create_throws_or_says_why_it_aborts_cpp23() {
    value_of_a_failed_create("c++23");
}

/// The README's C and C++ examples, each wrapped in a `main` of its own, compile (with
/// `-Wall -Wextra -Werror`) and link against this build's library. They read from S3 and from
/// an HTTPS host, so they are not run (no test touches another address).
#[test]
fn the_readme_s_c_and_cpp_examples_compile() {
    let readme = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md");
    let readme = std::fs::read_to_string(readme).unwrap();
    let dir = tempfile::tempdir().unwrap();
    for (fence, lang, file) in [
        ("```c\n", Lang::C, "readme.c"),
        ("```cpp\n", Lang::Cpp("c++17"), "readme.cpp"),
    ] {
        let blocks: Vec<&str> = readme
            .split(fence)
            .skip(1)
            .filter_map(|rest| rest.split_once("```").map(|(block, _)| block))
            .collect();
        assert_eq!(blocks.len(), 1, "{fence}: one example in the README");
        let (includes, body): (Vec<&str>, Vec<&str>) = blocks[0]
            .lines()
            .partition(|line| line.starts_with("#include"));
        let source = format!(
            "{}\nint main(void) {{\n{}\n    return 0;\n}}\n",
            includes.join("\n"),
            body.join("\n")
        );
        let path = dir.path().join(file);
        std::fs::write(&path, source).unwrap();
        compile(lang, &[path.to_str().unwrap()]);
    }
}

#[test]
fn the_read_ranges_example_reads_exact_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let file = pattern_file(dir.path(), "local.bin", MIB);
    let server = MockServer::start();
    server.insert("/object", pattern(0, MIB));
    let program = compile(Lang::C, &["examples/read_ranges.c"]);
    for address in [file.to_str().unwrap().to_owned(), server.url("/object")] {
        let output = program.run(&[&address, "0:4096", "5000:100", "1048570:100", "7:0"]);
        let stdout = String::from_utf8_lossy(&output.stdout);
        // One read fails (zero length), so the example exits 1; the rest is exact.
        assert_eq!(output.status.code(), Some(1), "{stdout}\n{output:?}");
        let mut lines: Vec<&str> = stdout.lines().filter(|l| l.starts_with("read ")).collect();
        lines.sort_unstable();
        let fnv = |bytes: &[u8]| {
            bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| {
                (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
            })
        };
        let expected = [
            format!(
                "read 0 0:4096 ok 4096 bytes fnv1a={:016x}",
                fnv(&pattern(0, 4096))
            ),
            format!(
                "read 1 5000:100 ok 100 bytes fnv1a={:016x}",
                fnv(&pattern(5000, 100))
            ),
            format!(
                "read 2 1048570:100 range_not_satisfiable 6 bytes fnv1a={:016x}",
                fnv(&pattern(1_048_570, 6))
            ),
            "read 3 7:0 invalid_range 0 bytes".to_owned(),
        ];
        assert_eq!(lines.len(), 4, "{stdout}");
        for (line, expected) in lines.iter().zip(&expected) {
            assert!(line.starts_with(expected.as_str()), "{line} vs {expected}");
        }
    }
}

/// Random batches through the C ABI (tests/c/random.c, under AddressSanitizer) of objects on
/// an HTTP mock, on an S3 mock (signed with a credential callback in C) and in local files,
/// in rounds: before each round the mocks get a few faults a client rides out, chosen by the
/// round's seed, so every read must still end as it would without them. `CHAOS_SEED` (the
/// first seed) and `CHAOS_CASES` (how many cases) choose other seeds, as for the conformance
/// suite's random cases.
#[test]
fn random_batches_from_c() {
    let number = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
    let first = number("CHAOS_SEED").unwrap_or(1);
    let cases = number("CHAOS_CASES").unwrap_or(200);
    const PER_ROUND: u64 = 20;
    const NAMES: [&str; 3] = ["big", "small", "empty"];
    const SIZES: [u64; 3] = [MIB, 3000, 0];

    let dir = tempfile::tempdir().unwrap();
    let server = MockServer::start();
    let s3 = karu_testkit::S3Mock::start();
    s3.create_bucket("karu-random");
    s3.add_credentials(karu_testkit::MockCredentials::new(
        "AKIDRANDOM",
        "random-secret",
    ));
    // Each object's address and size (`-`: missing, `!`: its credentials are refused).
    let mut objects: Vec<(String, String)> = Vec::new();
    for (name, size) in NAMES.iter().zip(SIZES) {
        server.insert(&format!("/{name}"), pattern(0, size));
        objects.push((server.url(&format!("/{name}")), size.to_string()));
        s3.insert("karu-random", name, pattern(0, size));
        objects.push((format!("s3://karu-random/{name}"), size.to_string()));
        let path = pattern_file(dir.path(), name, size);
        objects.push((path.to_str().unwrap().to_owned(), size.to_string()));
    }
    objects.push((server.url("/missing"), "-".into()));
    objects.push(("s3://karu-random/missing".into(), "-".into()));
    objects.push(("s3://refused/object".into(), "!".into()));
    let missing = dir.path().join("missing");
    objects.push((missing.to_str().unwrap().to_owned(), "-".into()));
    let program = compile(Lang::C, &["tests/c/random.c"]);

    let mut ways = std::collections::BTreeMap::<String, u64>::new();
    let mut seed = first;
    while seed < first + cases {
        let count = PER_ROUND.min(first + cases - seed);
        let mut planted = Vec::new();
        let mocks = [(&server, ""), (s3.server(), "/karu-random")];
        for (k, (mock, prefix)) in mocks.into_iter().enumerate() {
            mock.clear_faults();
            let paths = NAMES.map(|name| format!("{prefix}/{name}"));
            planted.extend(plant_faults(mock, seed * 2 + k as u64, &paths));
        }
        let mut args = vec![seed.to_string(), count.to_string(), s3.endpoint()];
        for (address, size) in &objects {
            args.extend([address.clone(), size.clone()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let output = program.run(&args);
        let what = format!("seeds {seed}..{} with faults {planted:?}", seed + count);
        assert_success_in(&output, &what);
        for line in String::from_utf8_lossy(&output.stdout).lines() {
            let way = line.split(", ").nth(1).unwrap_or(line).to_owned();
            *ways.entry(way).or_insert(0) += 1;
        }
        seed += count;
    }
    assert_eq!(ways.values().sum::<u64>(), cases, "{ways:?}");
    eprintln!(
        "random C ABI cases: seeds {first}..{}, drained {ways:?}",
        first + cases
    );
    // Every request was a range of one of the remote objects (reads, probes, both ends); on
    // S3 each was signed with the callback's key pair (the mock checked every signature),
    // and none went to the bucket whose credentials were refused. Over ten rounds or more,
    // the planted faults met requests on both mocks: the reads rode them out.
    let requests = server.requests();
    let faulted =
        |log: &[karu_testkit::RequestRecord]| log.iter().filter(|r| r.fault.is_some()).count();
    if cases >= 10 * PER_ROUND {
        assert!(faulted(&requests) > 0 && faulted(&s3.server().requests()) > 0);
    }
    assert!(
        requests.iter().all(|r| {
            ["/big", "/small", "/empty", "/missing"].contains(&r.path.as_str()) && r.range.is_some()
        }),
        "{requests:?}"
    );
    assert!(
        s3.signature_failures().is_empty(),
        "{:?}",
        s3.signature_failures()
    );
    let requests = s3.server().requests();
    assert!(!requests.is_empty());
    for r in &requests {
        let authorization = r.header("authorization").unwrap_or_default();
        assert!(
            r.path.starts_with("/karu-random/") && r.range.is_some(),
            "{r:?}"
        );
        assert!(authorization.contains("Credential=AKIDRANDOM/"), "{r:?}");
    }
}

/// Up to three faults, each on up to two requests (of any path or of one of `paths`), that a
/// client rides out with its retries.
fn plant_faults(server: &MockServer, seed: u64, paths: &[String]) -> Vec<FaultRule> {
    let mut rng = Rng::new(seed);
    let mut planted = Vec::new();
    for _ in 0..rng.range(0, 4) {
        let fault = match rng.range(0, 7) {
            0 => Fault::Latency(Duration::from_millis(rng.range(1, 6))),
            1 => Fault::Status {
                code: *rng.pick(&[500, 502, 503, 504, 429]),
                retry_after: rng.chance(30).then(|| "0".to_string()),
            },
            2 => Fault::CutBodyAfter(rng.range(0, 70_000)),
            3 => Fault::ResetAfter(rng.range(0, 70_000)),
            4 => Fault::OkWithContentRange,
            5 => Fault::CloseDelimited,
            _ => Fault::OversizedErrorBody {
                code: 503,
                size: rng.range(1, 300_000) as usize,
            },
        };
        let mut rule = FaultRule::new(fault)
            .skip(rng.range(0, 30))
            .times(rng.range(1, 3));
        if rng.chance(50) {
            rule = rule.path(rng.pick(paths).as_str());
        }
        server.add_fault(rule.clone());
        planted.push(rule);
    }
    planted
}

/// The fenced blocks of `lang` in this crate's README.md, in order.
fn readme_blocks(lang: &str) -> Vec<String> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md");
    let fence = format!("```{lang}\n");
    let mut blocks = Vec::new();
    let mut rest = readme.as_str();
    while let Some(start) = rest.find(&fence) {
        let body = &rest[start + fence.len()..];
        let end = body.find("```\n").expect("a closed block");
        blocks.push(body[..end].to_owned());
        rest = &body[end..];
    }
    blocks
}

#[test]
fn readme_programs_read_a_file_and_a_server() {
    let dir = tempfile::tempdir().unwrap();
    let file = pattern_file(dir.path(), "local.bin", 1000);
    let server = MockServer::start();
    server.insert("/object", pattern(0, MIB));
    let expected_head: String = pattern(0, 16).iter().map(|b| format!(" {b:02x}")).collect();
    for (lang, extension) in [(Lang::C, "c"), (Lang::Cpp("c++17"), "cpp")] {
        let blocks = readme_blocks(extension);
        assert_eq!(blocks.len(), 1, "one {extension} program in README.md");
        let source = dir.path().join(format!("first_read.{extension}"));
        std::fs::write(&source, &blocks[0]).unwrap();
        let program = compile(lang, &[source.to_str().unwrap()]);
        for (address, size) in [
            (file.to_str().unwrap().to_owned(), 1000),
            (server.url("/object"), MIB),
        ] {
            let output = program.run(&[&address]);
            assert_success_in(&output, &format!("the README's {extension} program"));
            assert_eq!(
                String::from_utf8_lossy(&output.stdout),
                format!("{size} bytes; the first 16:{expected_head}\n"),
                "{extension} on {address}"
            );
        }
        let output = program.run(&[&server.url("/missing")]);
        assert_eq!(
            output.status.code(),
            Some(1),
            "{extension}: a missing object"
        );
        assert!(
            String::from_utf8_lossy(&output.stderr).contains("not_found"),
            "{extension}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    // Each run: the reader's probe of the size and version, then the read, pinned by it.
    let ranges: Vec<String> = server
        .requests()
        .iter()
        .filter(|r| r.path == "/object")
        .map(|r| r.range.clone().unwrap_or_default())
        .collect();
    assert_eq!(ranges, ["bytes=0-0", "bytes=0-15"].repeat(2));
}
