//! The plain HTTP provider against a real server, nginx: the conformance suite over HTTP/1.1
//! and over HTTPS with HTTP/2, and the core HTTP cases on files written by the test, with
//! evidence from nginx's access log (method, URI, the `Range` header, status, bytes).
//!
//! These tests need nginx. When it is missing they fail (never pass silently): run
//! `cargo xtask test`, which installs it.

use std::time::{Duration, Instant, UNIX_EPOCH};

use karu::{Client, Locator, Read, Status};
use karu_testkit::conformance::{self, NginxTarget, Options};
use karu_testkit::nginx::Nginx;
use karu_testkit::pattern;
use karu_testkit::reads::{
    KIB, MIB, assert_failed, assert_ok, assert_prefix, client, drain, read_all, read_one,
};

/// Fails (never skips) when nginx is not installed.
fn assert_nginx_available() {
    assert!(
        Nginx::available(),
        "nginx is not installed: run `cargo xtask test`, which installs it \
         (or `apt-get install nginx-light`)"
    );
}

/// The whole suite on nginx started by `start`.
fn conforms(start: fn() -> std::io::Result<NginxTarget>) {
    assert_nginx_available();
    let target = start().expect("nginx starts");
    let report = conformance::run(&target, &Options::default().seeds_from_env());
    println!("{report}");
    report.assert_passed();
}

#[test]
fn http_provider_conforms_on_nginx() {
    conforms(NginxTarget::start);
}

/// The clients speak only HTTP/2 (`http.version = "http2"`), which fails every read on a server
/// that does not: passing is the proof that nginx's HTTP/2 carried them.
#[test]
fn http_provider_conforms_on_nginx_over_https_and_http2() {
    conforms(NginxTarget::start_https_http2);
}

/// A directory of pattern files served by nginx.
struct Served {
    nginx: Nginx,
    root: tempfile::TempDir,
}

impl Served {
    /// nginx serving `files` (path under the root, size in bytes) filled with the pattern.
    fn start(files: &[(&str, u64)]) -> Served {
        assert_nginx_available();
        let root = tempfile::tempdir().unwrap();
        for &(path, size) in files {
            let file = root.path().join(path.trim_start_matches('/'));
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(&file, pattern(0, size as usize)).unwrap();
        }
        let nginx = Nginx::start(root.path()).expect("nginx starts");
        Served { nginx, root }
    }

    fn locate(&self, client: &Client, path: &str) -> Locator {
        client.locate(&self.nginx.url(path)).unwrap()
    }

    /// The access log once it holds `n` lines (nginx writes a line when it has finished a
    /// request, which can be just after the client read the response).
    fn log(&self, n: usize) -> Vec<Logged> {
        let give_up = Instant::now() + Duration::from_secs(10);
        loop {
            let lines = self.nginx.access_log();
            if lines.len() >= n || Instant::now() > give_up {
                assert_eq!(lines.len(), n, "access log: {lines:#?}");
                return lines.iter().map(|l| Logged::parse(l)).collect();
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// nginx's strong ETag of a file: `"<mtime hex>-<size hex>"`.
    fn etag(&self, path: &str) -> String {
        let meta = std::fs::metadata(self.root.path().join(path.trim_start_matches('/'))).unwrap();
        let mtime = meta.modified().unwrap().duration_since(UNIX_EPOCH).unwrap();
        format!("\"{:x}-{:x}\"", mtime.as_secs(), meta.len())
    }
}

/// One access log line (see [`karu_testkit::nginx::ACCESS_LOG_FORMAT`]).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Logged {
    method: String,
    uri: String,
    /// The `Range` header, `-` when absent.
    range: String,
    status: u16,
    bytes: u64,
}

impl Logged {
    fn parse(line: &str) -> Logged {
        let fields: Vec<&str> = line.split(' ').collect();
        assert_eq!(fields.len(), 6, "{line}");
        Logged {
            method: fields[0].to_string(),
            uri: fields[1].to_string(),
            range: fields[2].trim_matches('"').to_string(),
            status: fields[3].parse().unwrap(),
            bytes: fields[4].parse().unwrap(),
        }
    }
}

fn ranges(log: &[Logged]) -> Vec<&str> {
    let mut out: Vec<&str> = log.iter().map(|l| l.range.as_str()).collect();
    out.sort_unstable();
    out
}

#[test]
fn scattered_reads_arrive_exact_and_merged_requests_show_in_the_access_log() {
    let served = Served::start(&[("/data/a.bin", 20 * MIB)]);
    let client = client();
    let object = served.locate(&client, "/data/a.bin");
    let reads = [
        (0, 100),
        (200, 50),                       // merges with the first
        (5 * MIB, 64 * KIB),             // 100 KiB apart: one request for the three
        (5 * MIB + 164 * KIB, 64 * KIB), //
        (5 * MIB + 328 * KIB, 64 * KIB), //
        (12 * MIB + 1, 4095),            // alone
        (20 * MIB - 10, 10),             // the last bytes
    ];
    let batch = client.submit(reads.iter().map(|&(o, l)| Read::new(&object, o, l)));
    let transfers = batch.stats().transfers;
    let done = drain(&batch);
    for (c, &(o, l)) in done.iter().zip(&reads) {
        assert_ok(c, o, l);
    }
    assert_eq!(transfers, 4);
    let log = served.log(transfers);
    assert!(
        log.iter()
            .all(|l| l.method == "GET" && l.uri == "/data/a.bin" && l.status == 206),
        "{log:#?}"
    );
    let hull = 5 * MIB + 392 * KIB - 1;
    let mut want = vec![
        "bytes=0-249".to_string(),
        format!("bytes={}-{hull}", 5 * MIB),
        format!("bytes={}-{}", 12 * MIB + 1, 12 * MIB + 4095),
        format!("bytes={}-{}", 20 * MIB - 10, 20 * MIB - 1),
    ];
    want.sort_unstable();
    assert_eq!(ranges(&log), want);
    let sent: u64 = log.iter().map(|l| l.bytes).sum();
    assert_eq!(sent, 250 + 392 * KIB + 4095 + 10, "nothing fetched twice");
}

#[test]
fn reads_reaching_the_end_of_a_file_get_the_valid_prefix() {
    let served = Served::start(&[("/small.bin", 1000)]);
    let client = client();
    let object = served.locate(&client, "/small.bin");
    assert_prefix(&read_one(&client, &object, 900, 200), 900, 100);
    assert_prefix(&read_one(&client, &object, 1000, 10), 1000, 0);
    let done = read_all(&client, &object, &[(950, 40), (980, 100)]);
    assert_ok(&done[0], 950, 40);
    assert_prefix(&done[1], 980, 20);
    let log = served.log(3);
    let seen: Vec<(&str, u16, u64)> = log
        .iter()
        .map(|l| {
            (
                l.range.as_str(),
                l.status,
                if l.status == 206 { l.bytes } else { 0 },
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("bytes=900-1099", 206, 100),
            ("bytes=1000-1009", 416, 0),
            ("bytes=950-1079", 206, 50)
        ]
    );
}

#[test]
fn a_missing_file_is_not_found_after_one_request() {
    let served = Served::start(&[("/a.bin", 10)]);
    let client = client();
    let c = read_one(&client, &served.locate(&client, "/missing.bin"), 0, 10);
    assert_failed(&c, Status::NotFound);
    let log = served.log(1);
    assert_eq!((log[0].uri.as_str(), log[0].status), ("/missing.bin", 404));
}

#[test]
fn stat_returns_the_size_and_nginxs_strong_etag_from_one_request() {
    let served = Served::start(&[("/a.bin", 3 * MIB + 7), ("/empty.bin", 0)]);
    let client = client();
    let info = client.stat(&served.locate(&client, "/a.bin")).unwrap();
    assert_eq!(info.size, Some(3 * MIB + 7));
    assert_eq!(info.etag, Some(served.etag("/a.bin")));
    let info = client.stat(&served.locate(&client, "/empty.bin")).unwrap();
    assert_eq!(info.size, Some(0));
    let log = served.log(2);
    assert_eq!(
        (log[0].range.as_str(), log[0].status, log[0].bytes),
        ("bytes=0-0", 206, 1)
    );
    assert_eq!(log[1].range, "bytes=0-0");
}

#[test]
fn read_ends_asks_for_a_head_and_a_suffix_together() {
    let served = Served::start(&[("/a.bin", 5 * MIB), ("/tiny.bin", 100)]);
    let client = client();
    let ends = client
        .read_ends(&served.locate(&client, "/a.bin"), 1000, 4096)
        .unwrap();
    assert_eq!(ends.size, 5 * MIB);
    assert_eq!(ends.etag, Some(served.etag("/a.bin")));
    assert_eq!(ends.head, pattern(0, 1000));
    assert_eq!(ends.tail, pattern(5 * MIB - 4096, 4096));
    let ends = client
        .read_ends(&served.locate(&client, "/tiny.bin"), 80, 80)
        .unwrap();
    assert_eq!(
        (ends.size, ends.head, ends.tail),
        (100, pattern(0, 80), pattern(20, 80))
    );
    let log = served.log(4);
    assert_eq!(ranges(&log[..2]), ["bytes=-4096", "bytes=0-999"]);
    assert_eq!(ranges(&log[2..]), ["bytes=-80", "bytes=0-79"]);
    assert!(log.iter().all(|l| l.status == 206), "{log:#?}");
}

#[test]
fn if_match_with_nginxs_etag_passes_and_a_wrong_one_is_a_precondition_failure() {
    let served = Served::start(&[("/a.bin", MIB)]);
    let client = client();
    let object = served.locate(&client, "/a.bin");
    let etag = client
        .stat(&object)
        .unwrap()
        .etag
        .expect("nginx sends a strong ETag");
    let batch = client.submit([
        Read::new(&object, 100, 100).if_match(etag.clone()),
        Read::new(&object, 200, 100).if_match("\"not-the-etag\""),
    ]);
    let done = drain(&batch);
    assert_ok(&done[0], 100, 100);
    assert_failed(&done[1], Status::PreconditionFailed);
    let log = served.log(3);
    let mut seen: Vec<(&str, u16)> = log[1..]
        .iter()
        .map(|l| (l.range.as_str(), l.status))
        .collect();
    seen.sort_unstable();
    assert_eq!(seen, [("bytes=100-199", 206), ("bytes=200-299", 412)]);
}
