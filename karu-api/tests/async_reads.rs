//! The async API on every kind of executor: the same reads (a read, a read past the end, a
//! stat, both ends, a batch drained as a `Stream`, an `ObjectReader`) of a local file, an
//! object on the HTTP mock and one on the S3 mock, polled by a tokio current-thread runtime and
//! a multi-thread one (neither with its I/O or time driver: Karu needs none of the caller's)
//! and by `futures::executor::block_on`. Karu's futures only wait to be woken: two requests
//! held at one mock barrier both make progress on a single executor thread.

use std::future::Future;
use std::path::Path;

use futures::StreamExt;
use karu::{Client, Completion, Evidence, Locator, ObjectReader, Read, Status};
use karu_testkit::conformance::{S3MockTarget, Target};
use karu_testkit::reads::{PATIENCE, assert_pattern, client};
use karu_testkit::{Fault, FaultRule, MockServer, pattern};

/// Size of every object read here.
const SIZE: u64 = 200_000;

/// Run `f` on a thread of its own, failing the test (instead of hanging) if it has not
/// returned within [`PATIENCE`].
fn within<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (done, outcome) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)));
    });
    match outcome.recv_timeout(PATIENCE) {
        Ok(Ok(value)) => value,
        Ok(Err(panic)) => std::panic::resume_unwind(panic),
        Err(_) => panic!("{what} did not finish within {PATIENCE:?}"),
    }
}

/// The executors a test runs its future on.
#[derive(Debug, Clone, Copy)]
enum Executor {
    /// A tokio current-thread runtime without its I/O and time drivers.
    TokioCurrentThread,
    /// A tokio multi-thread runtime without its drivers; the future runs as a spawned task.
    TokioMultiThread,
    /// `futures::executor::block_on`.
    FuturesBlockOn,
}

const EXECUTORS: [Executor; 3] = [
    Executor::TokioCurrentThread,
    Executor::TokioMultiThread,
    Executor::FuturesBlockOn,
];

impl Executor {
    /// Run the future `make` builds to completion on this executor.
    fn run<T, Fut>(self, make: impl FnOnce() -> Fut + Send + 'static) -> T
    where
        T: Send + 'static,
        Fut: Future<Output = T> + Send + 'static,
    {
        within(&format!("the future on {self:?}"), move || match self {
            Executor::TokioCurrentThread => tokio::runtime::Builder::new_current_thread()
                .build()
                .expect("a current-thread runtime")
                .block_on(make()),
            Executor::TokioMultiThread => {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .build()
                    .expect("a multi-thread runtime");
                let task = runtime.spawn(make());
                runtime
                    .block_on(task)
                    .expect("the task ends without panicking")
            }
            Executor::FuturesBlockOn => futures::executor::block_on(make()),
        })
    }
}

/// Reads far apart, neighbours, and one past the end, drained from a batch as a stream.
const BATCH: [(u64, u64); 5] = [
    (0, 10),
    (50_000, 4096),
    (54_096, 100),
    (150_000, 1),
    (SIZE - 5, 10),
];

/// The same reads, whatever polls them; returns how many transfers its batch planned.
async fn the_reads(client: Client, object: Locator) -> usize {
    let info = client.stat_async(&object).await.expect("stat");
    assert_eq!(info.size, Some(SIZE));

    let bytes = client.read_async(&object, 1000, 5000).await.expect("read");
    assert_pattern(&bytes, 1000, 5000);

    let err = client
        .read_async(&object, SIZE - 10, 100)
        .await
        .expect_err("a read past the end fails");
    assert_eq!(err.status(), Status::RangeNotSatisfiable, "{err:?}");
    match err.evidence() {
        Some(&Evidence::EndOfObject {
            offset,
            requested,
            received,
            ..
        }) => assert_eq!((offset, requested, received), (SIZE - 10, 100, 10)),
        other => panic!("no end-of-object evidence: {other:?}"),
    }

    let ends = client
        .read_ends_async(&object, 100, 200)
        .await
        .expect("read_ends");
    assert_eq!(ends.size, SIZE);
    assert_pattern(&ends.head, 0, 100);
    assert_pattern(&ends.tail, SIZE - 200, 200);

    let mut batch = client.submit(BATCH.iter().map(|&(o, l)| Read::new(&object, o, l)));
    let transfers = batch.stats().transfers;
    let mut done: Vec<Completion> = Vec::new();
    while let Some(completion) = batch.next().await {
        done.push(completion);
    }
    done.sort_by_key(Completion::index);
    assert_eq!(done.len(), BATCH.len());
    for (c, &(o, l)) in done.iter().zip(&BATCH[..4]) {
        assert_eq!(c.status(), Status::Ok, "{c:?}");
        assert_pattern(c.bytes(), o, l);
    }
    assert_eq!(done[4].status(), Status::RangeNotSatisfiable);
    assert_pattern(done[4].bytes(), SIZE - 5, 5);

    let reader = ObjectReader::open_async(&client, &object)
        .await
        .expect("open");
    assert_eq!(reader.size(), SIZE);
    let mut slice = vec![0u8; 300];
    reader.read_at_async(7, &mut slice).await.expect("read_at");
    assert_pattern(&slice, 7, 300);
    let parts = reader
        .read_many_async(&[(100, 10), (SIZE - 3, 3)])
        .await
        .expect("read_many");
    assert_pattern(&parts[0], 100, 10);
    assert_pattern(&parts[1], SIZE - 3, 3);
    transfers
}

/// Requests the reads send to a remote object: stat, read, past the end, both ends (suffix
/// ranges: two), the batch's transfers, the reader's stat, `read_at`, `read_many` (two).
fn remote_requests(transfers: usize) -> usize {
    1 + 1 + 1 + 2 + transfers + 1 + 1 + 2
}

fn local_object(dir: &Path) -> String {
    let path = dir.join("object.bin");
    std::fs::write(&path, pattern(0, SIZE as usize)).expect("write the object");
    path.to_str()
        .expect("temporary paths are UTF-8")
        .to_string()
}

#[test]
fn local_reads_on_every_executor() {
    let dir = tempfile::tempdir().unwrap();
    let address = local_object(dir.path());
    let client = client();
    let object = client.locate(&address).unwrap();
    for executor in EXECUTORS {
        let (client, object) = (client.clone(), object.clone());
        executor.run(move || the_reads(client, object));
    }
}

#[test]
fn http_reads_on_every_executor() {
    let server = MockServer::start();
    server.insert_virtual("/object.bin", SIZE);
    let client = client();
    let object = client.locate(&server.url("/object.bin")).unwrap();
    for executor in EXECUTORS {
        let (client, object) = (client.clone(), object.clone());
        let transfers = executor.run(move || the_reads(client, object));
        // Every request is a closed or suffix range of the object, none repeated by a retry.
        let log = server.take_requests();
        assert_eq!(
            log.len(),
            remote_requests(transfers),
            "{executor:?}: {log:#?}"
        );
        assert!(
            log.iter()
                .all(|r| r.path == "/object.bin" && r.range.is_some())
        );
        assert!(
            log.iter().all(|r| matches!(r.status, 206 | 416)),
            "{log:#?}"
        );
    }
}

#[test]
fn s3_reads_on_a_tokio_runtime_and_on_block_on() {
    let s3 = S3MockTarget::start();
    s3.put("object.bin", &pattern(0, SIZE as usize)).unwrap();
    let client = s3.builder().build().unwrap();
    let object = client.locate(&s3.address("object.bin")).unwrap();
    for executor in [Executor::TokioMultiThread, Executor::FuturesBlockOn] {
        let (client, object) = (client.clone(), object.clone());
        let transfers = executor.run(move || the_reads(client, object));
        let log = s3.mock_s3().server().take_requests();
        assert_eq!(
            log.len(),
            remote_requests(transfers),
            "{executor:?}: {log:#?}"
        );
        assert!(
            log.iter().all(|r| r.header("authorization").is_some()),
            "every request is signed"
        );
    }
}

#[test]
fn futures_never_block_the_thread_that_polls_them() {
    // Every request for these paths is held until a second one arrives: two futures polled on
    // one thread can only finish if neither blocks it.
    let server = MockServer::start();
    for path in ["/read.bin", "/stat.bin", "/ends.bin"] {
        server.insert_virtual(path, SIZE);
        server.add_fault(FaultRule::new(Fault::Barrier(2)).path(path));
    }
    let client = client();
    let at = |path: &str| client.locate(&server.url(path)).unwrap();
    let (read, stat, ends) = (at("/read.bin"), at("/stat.bin"), at("/ends.bin"));

    let c = client.clone();
    Executor::TokioCurrentThread.run(move || async move {
        let (a, b) = tokio::join!(c.read_async(&read, 0, 10), c.read_async(&read, 100, 10));
        assert_pattern(&a.unwrap(), 0, 10);
        assert_pattern(&b.unwrap(), 100, 10);
        let (a, b) = tokio::join!(c.stat_async(&stat), c.stat_async(&stat));
        assert_eq!((a.unwrap().size, b.unwrap().size), (Some(SIZE), Some(SIZE)));
    });
    let c = client.clone();
    let read = at("/read.bin");
    Executor::FuturesBlockOn.run(move || async move {
        // Suffix ranges: each read_ends sends its head and its tail at once, which meet.
        let ends = c.read_ends_async(&ends, 10, 10).await.unwrap();
        assert_pattern(&ends.tail, SIZE - 10, 10);
        let (a, b) =
            futures::future::join(c.read_async(&read, 5, 5), c.read_async(&read, 50, 5)).await;
        assert_pattern(&a.unwrap(), 5, 5);
        assert_pattern(&b.unwrap(), 50, 5);
    });
    let log = server.requests();
    assert_eq!(log.len(), 8, "{log:#?}");
    assert!(log.iter().all(|r| matches!(r.status, 206)), "{log:#?}");
}
