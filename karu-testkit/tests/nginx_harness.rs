//! The nginx harness serves a directory, answers a range with 206 and logs the request.

mod support;

use std::time::{Duration, Instant};

use karu_testkit::nginx::Nginx;
use karu_testkit::pattern;
use support::Client;

fn log_lines(nginx: &Nginx, want: usize) -> Vec<String> {
    // nginx writes the line when it finishes the request, maybe just after the client read it.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let lines = nginx.access_log();
        if lines.len() >= want || Instant::now() > deadline {
            return lines;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn nginx_serves_a_range_with_206_and_logs_it() {
    if !Nginx::available() {
        println!(
            "note: nginx is not installed; skipping the nginx harness test (apt-get install nginx-light)"
        );
        return;
    }
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir(root.path().join("data")).unwrap();
    std::fs::write(root.path().join("data/a.bin"), pattern(0, 10_000)).unwrap();
    let nginx = Nginx::start(root.path()).expect("nginx starts");
    assert!(nginx.url("/data/a.bin").starts_with("http://127.0.0.1:"));

    let mut client = Client::connect(nginx.addr());
    let r = client.get_range("/data/a.bin", "bytes=100-199");
    assert_eq!(r.status, 206);
    assert_eq!(r.header("content-range"), Some("bytes 100-199/10000"));
    assert_eq!(r.body, pattern(100, 100));
    let etag = r.header("etag").expect("nginx sends ETags").to_owned();
    let r = client
        .request(
            "GET",
            "/data/a.bin",
            &[("Range", "bytes=-10"), ("If-Match", &etag)],
        )
        .unwrap();
    assert_eq!((r.status, r.body), (206, pattern(9990, 10)));
    let r = client.get("/data/missing.bin");
    assert_eq!(r.status, 404);

    let lines = log_lines(&nginx, 3);
    assert_eq!(lines.len(), 3, "{lines:?}");
    let first: Vec<&str> = lines[0].split(' ').collect();
    assert_eq!(
        first[..5],
        ["GET", "/data/a.bin", "\"bytes=100-199\"", "206", "100"]
    );
    assert!(
        lines[1].starts_with("GET /data/a.bin \"bytes=-10\" 206 10 "),
        "{lines:?}"
    );
    assert!(
        lines[2].starts_with("GET /data/missing.bin \"-\" 404 "),
        "{lines:?}"
    );
    // One keep-alive connection carried all three.
    let connection = |line: &String| line.rsplit(' ').next().unwrap().to_owned();
    assert!(
        lines.iter().all(|l| connection(l) == connection(&lines[0])),
        "{lines:?}"
    );

    let addr = nginx.addr();
    drop(nginx);
    assert!(
        std::net::TcpStream::connect(addr).is_err(),
        "nginx stopped on drop"
    );
}
