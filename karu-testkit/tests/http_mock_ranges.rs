//! The mock server answers like a real object server: range forms, 416/404/412, ETags, HEAD,
//! and the request log records what happened.

mod support;

use karu_testkit::{MockServer, pattern};
use support::{BodyEnd, Client, request};

fn server_with(path: &str, len: usize) -> (MockServer, Vec<u8>) {
    let server = MockServer::start();
    let data = pattern(0, len);
    server.insert(path, data.clone());
    (server, data)
}

#[test]
fn every_range_form_gets_206_with_exact_content_range() {
    let (server, data) = server_with("/data/a.bin", 1000);
    let mut client = Client::connect(server.addr());
    // (Range header, first, last) of the 206 expected.
    let cases = [
        ("bytes=0-9", 0, 9),
        ("bytes=10-10", 10, 10),
        ("bytes=990-2000", 990, 999),
        ("bytes=995-", 995, 999),
        ("bytes=0-", 0, 999),
        ("bytes=-5", 995, 999),
        ("bytes=-1000", 0, 999),
        ("bytes=-5000", 0, 999),
    ];
    for (range, first, last) in cases {
        let r = client.get_range("/data/a.bin", range);
        assert_eq!(r.status, 206, "{range}");
        assert_eq!(
            r.header("content-range"),
            Some(format!("bytes {first}-{last}/1000").as_str()),
            "{range}"
        );
        assert_eq!(r.content_length(), Some(last - first + 1), "{range}");
        assert_eq!(r.body, &data[first as usize..=last as usize], "{range}");
        assert_eq!(r.header("accept-ranges"), Some("bytes"));
        assert!(r.header("etag").is_some());
        assert!(httpdate::parse_http_date(r.header("last-modified").unwrap()).is_ok());
        assert_eq!(r.end, BodyEnd::Complete);
    }
    let log = server.requests();
    assert_eq!(log.len(), cases.len());
    assert!(
        log.iter()
            .all(|r| r.status == 206 && r.connection == log[0].connection)
    );
}

#[test]
fn whole_body_without_range_or_with_lists_and_garbage() {
    let (server, data) = server_with("/a.bin", 300);
    let mut client = Client::connect(server.addr());
    let plain = client.get("/a.bin");
    assert_eq!(plain.status, 200);
    assert_eq!(plain.body, data);
    assert_eq!(plain.header("content-range"), None);
    assert_eq!(plain.header("accept-ranges"), Some("bytes"));
    for range in ["bytes=0-1,5-6", "bytes=5-2", "bytes=x-y", "pages=0-1"] {
        let r = client.get_range("/a.bin", range);
        assert_eq!(r.status, 200, "{range}");
        assert_eq!(r.header("content-range"), None, "{range}");
        assert_eq!(r.content_length(), Some(300));
        assert_eq!(r.body, data, "{range}");
    }
}

#[test]
fn unsatisfiable_ranges_get_416_with_the_size() {
    let (server, _) = server_with("/a.bin", 100);
    server.insert("/empty", Vec::new());
    let mut client = Client::connect(server.addr());
    for range in ["bytes=100-", "bytes=100-200", "bytes=5000-6000", "bytes=-0"] {
        let r = client.get_range("/a.bin", range);
        assert_eq!(r.status, 416, "{range}");
        assert_eq!(r.header("content-range"), Some("bytes */100"), "{range}");
    }
    for range in ["bytes=0-0", "bytes=0-", "bytes=-1"] {
        let r = client.get_range("/empty", range);
        assert_eq!(r.status, 416, "{range}");
        assert_eq!(r.header("content-range"), Some("bytes */0"));
        // The body states the size too, as S3's does.
        let text = String::from_utf8(r.body).unwrap();
        assert!(
            text.contains(&format!(
                "<RangeRequested>{range}</RangeRequested><ActualObjectSize>0</ActualObjectSize>"
            )),
            "{text}"
        );
    }
    let whole = client.get("/empty");
    assert_eq!((whole.status, whole.content_length()), (200, Some(0)));
    assert!(
        server
            .requests()
            .iter()
            .all(|r| r.body_bytes == 0 || r.status == 416)
    );
}

#[test]
fn missing_objects_get_404_and_removed_ones_too() {
    let (server, _) = server_with("/a.bin", 10);
    let r = request(server.addr(), "GET", "/nope.bin", &[]);
    assert_eq!(r.status, 404);
    assert!(String::from_utf8_lossy(&r.body).contains("<Code>NoSuchKey</Code>"));
    assert_eq!(request(server.addr(), "GET", "/a.bin", &[]).status, 200);
    server.remove("/a.bin");
    assert_eq!(request(server.addr(), "GET", "/a.bin", &[]).status, 404);
    assert_eq!(request(server.addr(), "POST", "/a.bin", &[]).status, 405);
}

#[test]
fn head_gets_headers_without_a_body_and_keeps_the_connection() {
    let (server, data) = server_with("/a.bin", 1000);
    let mut client = Client::connect(server.addr());
    let head = client
        .request("HEAD", "/a.bin", &[("Range", "bytes=100-199")])
        .unwrap();
    assert_eq!(head.status, 206);
    assert_eq!(head.content_length(), Some(100));
    assert_eq!(head.header("content-range"), Some("bytes 100-199/1000"));
    assert!(head.body.is_empty());
    let full_head = client.request("HEAD", "/a.bin", &[]).unwrap();
    assert_eq!(
        (full_head.status, full_head.content_length()),
        (200, Some(1000))
    );
    // The connection is still in sync: the next response is read correctly.
    let get = client.get_range("/a.bin", "bytes=0-3");
    assert_eq!(get.body, &data[..4]);
    let log = server.requests();
    assert_eq!(log.len(), 3);
    assert_eq!((log[0].method.as_str(), log[0].body_bytes), ("HEAD", 0));
    assert_eq!(log[2].body_bytes, 4);
    assert_eq!(server.connections_accepted(), 1);
}

#[test]
fn etags_are_strong_and_change_on_every_insert() {
    let server = MockServer::start();
    server.insert("/a", vec![1u8; 16]);
    let first = request(server.addr(), "GET", "/a", &[]);
    let e1 = first.header("etag").unwrap().to_owned();
    assert!(
        e1.starts_with('"') && e1.ends_with('"') && e1.len() > 2,
        "{e1}"
    );
    server.insert("/a", vec![1u8; 16]);
    let e2 = request(server.addr(), "GET", "/a", &[])
        .header("etag")
        .unwrap()
        .to_owned();
    assert_ne!(e1, e2);

    server.set_etag("/a", Some("\"custom\""));
    assert_eq!(
        request(server.addr(), "GET", "/a", &[]).header("etag"),
        Some("\"custom\"")
    );
    server.set_etag("/a", None);
    let none = request(server.addr(), "GET", "/a", &[]);
    assert_eq!(none.status, 200);
    assert_eq!(none.header("etag"), None);
}

#[test]
fn if_match_compares_strongly() {
    let (server, data) = server_with("/a", 100);
    let etag = request(server.addr(), "GET", "/a", &[])
        .header("etag")
        .unwrap()
        .to_owned();
    let mut client = Client::connect(server.addr());
    let mut get = |if_match: &str| {
        client
            .request(
                "GET",
                "/a",
                &[("Range", "bytes=0-9"), ("If-Match", if_match)],
            )
            .unwrap()
    };
    let ok = get(&etag);
    assert_eq!((ok.status, ok.body.as_slice()), (206, &data[..10]));
    assert_eq!(get("\"other\"").status, 412);
    assert_eq!(get("*").status, 206);
    assert_eq!(get(&format!("\"other\", {etag}")).status, 206);
    assert_eq!(get(&format!("W/{etag}")).status, 412);

    server.set_etag("/a", Some("W/\"weak\""));
    assert_eq!(
        get("W/\"weak\"").status,
        412,
        "weak ETags never match strongly"
    );
    assert_eq!(get("*").status, 206);
    server.set_etag("/a", None);
    assert_eq!(get("\"x\"").status, 412);
    assert_eq!(get("*").status, 206);
    let statuses: Vec<u16> = server.requests().iter().skip(1).map(|r| r.status).collect();
    assert_eq!(statuses, [206, 412, 206, 206, 412, 412, 206, 412, 206]);
    // A missing object is 404, whatever If-Match says.
    assert_eq!(
        request(server.addr(), "GET", "/nope", &[("If-Match", "*")]).status,
        404
    );
}

#[test]
fn the_log_records_requests_in_order_with_parsed_ranges_and_connections() {
    let (server, _) = server_with("/data/a.bin", 1000);
    let mut first = Client::connect(server.addr());
    first.get_range("/data/a.bin", "bytes=0-99");
    first
        .request(
            "GET",
            "/data/a.bin?versionId=7&x=1",
            &[("Range", "bytes=100-"), ("X-Test", "yes")],
        )
        .unwrap();
    first.get_range("/data/a.bin", "bytes=-10");
    let mut second = Client::connect(server.addr());
    second.get("/data/a.bin");
    second.get("/missing");

    let log = server.requests();
    assert_eq!(server.request_count(), 5);
    assert_eq!(log.len(), 5);
    assert_eq!(log[0].byte_range, Some((0, 99)));
    assert_eq!(log[0].range.as_deref(), Some("bytes=0-99"));
    assert_eq!((log[0].status, log[0].body_bytes), (206, 100));
    assert_eq!(log[1].path, "/data/a.bin");
    assert_eq!(log[1].query.as_deref(), Some("versionId=7&x=1"));
    assert_eq!(log[1].byte_range, None, "open ranges are not closed ranges");
    assert_eq!(log[1].header("x-test"), Some("yes"));
    assert_eq!(log[1].header("X-TEST"), Some("yes"));
    assert_eq!(
        log[1].headers[0],
        ("host".to_owned(), "127.0.0.1".to_owned())
    );
    assert_eq!(log[1].body_bytes, 900);
    assert_eq!(log[2].byte_range, None);
    assert_eq!(log[2].range.as_deref(), Some("bytes=-10"));
    assert_eq!(
        (log[3].status, log[3].body_bytes, log[3].range.clone()),
        (200, 1000, None)
    );
    assert_eq!(log[4].status, 404);
    assert!(log.iter().all(|r| r.fault.is_none() && r.method == "GET"));
    // Keep-alive: the first three share a connection, the last two another.
    assert!(log[..3].iter().all(|r| r.connection == log[0].connection));
    assert!(log[3..].iter().all(|r| r.connection == log[3].connection));
    assert_ne!(log[0].connection, log[3].connection);
    assert_eq!(server.connections_accepted(), 2);
    assert_eq!(
        server.bytes_sent(),
        100 + 900 + 10 + 1000 + log[4].body_bytes
    );

    let taken = server.take_requests();
    assert_eq!(taken, log);
    assert_eq!(server.request_count(), 0);
    first.get_range("/data/a.bin", "bytes=1-2");
    assert_eq!(server.requests()[0].byte_range, Some((1, 2)));
}

#[test]
fn virtual_objects_serve_the_pattern_at_the_end_of_a_gib() {
    let server = MockServer::start();
    let size = (1u64 << 30) + 7;
    server.insert_virtual("/big.bin", size);
    let mut client = Client::connect(server.addr());
    let tail = client.get_range("/big.bin", "bytes=-70000");
    assert_eq!(tail.status, 206);
    assert_eq!(
        tail.header("content-range"),
        Some(format!("bytes {}-{}/{size}", size - 70000, size - 1).as_str())
    );
    assert_eq!(tail.body, pattern(size - 70000, 70000));
    let mid = client.get_range("/big.bin", "bytes=536870909-536871000");
    assert_eq!(mid.body, pattern(536_870_909, 92));
    let past = client.get_range("/big.bin", &format!("bytes={size}-"));
    assert_eq!(past.status, 416);
    let head = client.request("HEAD", "/big.bin", &[]).unwrap();
    assert_eq!(head.content_length(), Some(size));
    // A shifted range is detected by the pattern.
    assert_ne!(pattern(size - 70000, 64), pattern(size - 69999, 64));
}
