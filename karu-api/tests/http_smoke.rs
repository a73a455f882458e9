//! Smoke test of the HTTP path against the mock server.

use karu::{Client, Read, Status};
use karu_testkit::{MockServer, pattern};

fn client() -> Client {
    Client::builder()
        .user_config_file(None)
        .project_config_file(None)
        .environment(Vec::<(String, String)>::new())
        .build()
        .unwrap()
}

#[test]
fn scattered_reads_merge_and_arrive_exact() {
    let server = MockServer::start();
    server.insert_virtual("/big.bin", 64 << 20);
    let client = client();
    let object = client.locate(&server.url("/big.bin")).unwrap();
    let reads = [
        (0u64, 100u64),
        (200, 50),
        (10 << 20, 4096),
        (63 << 20, 2 << 20),
    ];
    let batch = client.submit(reads.iter().map(|&(o, l)| Read::new(&object, o, l)));
    let done = batch.wait();
    assert_eq!(done[0].bytes(), pattern(0, 100).as_slice());
    assert_eq!(done[1].bytes(), pattern(200, 50).as_slice());
    assert_eq!(done[2].bytes(), pattern(10 << 20, 4096).as_slice());
    assert_eq!(done[3].status(), Status::RangeNotSatisfiable);
    assert_eq!(done[3].bytes_received(), 1 << 20);
    let log = server.requests();
    let ranges: Vec<_> = log.iter().map(|r| r.byte_range).collect();
    assert_eq!(log.len(), 3, "{ranges:?}");
    let stat = client.stat(&object).unwrap();
    assert_eq!(stat.size, 64 << 20);
    assert!(stat.etag.is_some());
    let ends = client.read_ends(&object, 10, 10).unwrap();
    assert_eq!(ends.head, pattern(0, 10));
    assert_eq!(ends.tail, pattern((64 << 20) - 10, 10));
}
