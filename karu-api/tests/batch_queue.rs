//! The completion queue: `next_timeout`, shared consumers, cancel, drop during a read, and
//! the batch as a `Stream`.

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use futures::stream::FusedStream;
use futures::{Stream, StreamExt};

use karu::{Completion, Next, Read, Status, UNBOUNDED};
use support::{
    LeaseGuard, PATIENCE, TinyExecutor, assert_pattern, client, drain, expect_completion,
    held_file, isolated, locate_file, pattern_file, wait_until_held,
};

/// Assert the completion of a read of 8 bytes of a held file: it ran (it was not cancelled)
/// once the lease was released, and delivered the file's first bytes.
#[track_caller]
fn assert_held_read(c: &Completion) {
    assert_eq!(c.status(), Status::Ok, "{c:?}");
    assert_eq!(c.bytes_received(), 8);
    assert_pattern(c.bytes(), 0, 8);
}

#[test]
fn next_times_out_while_a_read_runs_then_delivers_then_drains() {
    let dir = tempfile::tempdir().unwrap();
    let (held, lease) = held_file(dir.path(), "held.bin", 100);
    let client = client();
    let batch = client.submit([Read::new(&locate_file(&client, &held), 0, 8).tag(5)]);
    let _guard = LeaseGuard(lease.clone());

    // The worker is inside the read, waiting for the lease to be released: no completion can
    // exist, so waiting ends without one and changes nothing.
    wait_until_held(&batch, &lease);
    assert!(matches!(
        batch.next_timeout(Duration::from_millis(50)),
        Next::TimedOut
    ));
    assert!(matches!(batch.try_next(), Next::TimedOut));
    assert_eq!(batch.pending(), 1);

    lease.release();
    let c = expect_completion(&batch);
    assert_eq!((c.tag(), c.index()), (5, 0));
    assert_held_read(&c);
    assert_eq!(batch.pending(), 0);
    assert!(matches!(batch.next_timeout(PATIENCE), Next::Drained));
    assert!(matches!(batch.try_next(), Next::Drained));
    assert!(batch.wait().is_empty());
}

#[test]
fn a_batch_of_no_reads_is_drained_at_once() {
    let client = client();
    let batch = client.submit(Vec::new());
    let stats = batch.stats();
    assert_eq!(
        (
            stats.reads,
            stats.rejected,
            stats.transfers,
            stats.requested_bytes,
            stats.fetched_bytes
        ),
        (0, 0, 0, 0, 0)
    );
    assert_eq!(batch.pending(), 0);
    assert!(matches!(batch.try_next(), Next::Drained));
    assert!(matches!(batch.next_timeout(PATIENCE), Next::Drained));
    assert!(batch.next_blocking().is_none());
    assert!(batch.wait().is_empty());
    assert!(TinyExecutor::new().block_on(&mut (&batch).next()).is_none());
    assert!(batch.is_terminated());
}

#[test]
fn rejected_reads_are_queued_before_submit_returns() {
    let dir = tempfile::tempdir().unwrap();
    let path = pattern_file(dir.path(), "data.bin", 100);
    let client = client();
    let object = locate_file(&client, &path);
    let window = object.with_window(10, Some(10)).unwrap();

    let batch = client.submit([
        Read::new(&object, 0, 0),
        Read::new(&object, 0, UNBOUNDED),
        Read::new(&object, u64::MAX, 2),
        Read::new(&window, 5, 6),
        Read::new(&object, 0, 4).if_match("x"),
    ]);
    // No worker is involved: every completion is already queued.
    assert_eq!(batch.pending(), 0);
    let mut seen = BTreeMap::new();
    while let Next::Completion(c) = batch.try_next() {
        assert_eq!(c.bytes_received(), 0);
        assert!(seen.insert(c.index(), c.status()).is_none(), "{c:?} twice");
    }
    assert!(matches!(batch.try_next(), Next::Drained));
    let expected: BTreeMap<usize, Status> = [
        (0, Status::InvalidRange),
        (1, Status::InvalidRange),
        (2, Status::InvalidRange),
        (3, Status::InvalidRange),
        (4, Status::InvalidArgument),
    ]
    .into();
    assert_eq!(seen, expected);
}

#[test]
fn several_threads_draining_one_batch_see_each_completion_once() {
    const READS: u64 = 3000;
    const THREADS: usize = 4;
    let dir = tempfile::tempdir().unwrap();
    let path = pattern_file(dir.path(), "data.bin", 64 << 10);
    let client = client();
    let object = locate_file(&client, &path);

    // Every 30th read is invalid, so completions come from the planner and from the workers.
    let read = |i: u64| {
        let len = if i.is_multiple_of(30) { 0 } else { 1 + i % 97 };
        Read::new(&object, i * 17, len)
    };
    let batch = Arc::new(client.submit((0..READS).map(read)));
    let consumers: Vec<_> = (0..THREADS)
        .map(|_| {
            let batch = Arc::clone(&batch);
            std::thread::spawn(move || {
                let mut got = Vec::new();
                loop {
                    match batch.next_timeout(PATIENCE) {
                        Next::Completion(c) => got.push(c),
                        Next::Drained => return got,
                        Next::TimedOut => panic!("no completion within {PATIENCE:?}"),
                    }
                }
            })
        })
        .collect();
    let mut all: Vec<Completion> = consumers
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    all.sort_by_key(Completion::index);

    let indices: Vec<u64> = all.iter().map(|c| c.index() as u64).collect();
    assert_eq!(
        indices,
        (0..READS).collect::<Vec<_>>(),
        "each read exactly once"
    );
    for (i, c) in (0..READS).zip(&all) {
        if i.is_multiple_of(30) {
            assert_eq!(c.status(), Status::InvalidRange, "{c:?}");
        } else {
            assert_eq!(c.status(), Status::Ok, "{c:?}");
            assert_pattern(c.bytes(), i * 17, 1 + i % 97);
        }
    }
    assert!(matches!(batch.try_next(), Next::Drained));
}

/// Run `f` on another thread; fail the test (instead of hanging) if it does not return
/// within [`PATIENCE`].
fn within<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (done, outcome) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(f());
    });
    outcome
        .recv_timeout(PATIENCE)
        .unwrap_or_else(|_| panic!("{what} did not return within {PATIENCE:?}"))
}

#[test]
fn dropping_an_owned_batch_returns_while_a_worker_still_runs_its_read() {
    let dir = tempfile::tempdir().unwrap();
    let (held, lease) = held_file(dir.path(), "held.bin", 100);
    let data = pattern_file(dir.path(), "data.bin", 100);
    let client = isolated().file_workers(1).build().unwrap();
    let batch = client.submit([
        Read::new(&locate_file(&client, &held), 0, 8),
        Read::new(&locate_file(&client, &data), 0, 8),
    ]);
    let _guard = LeaseGuard(lease.clone());
    wait_until_held(&batch, &lease);

    // The only worker is held on the lease until the test lets it go, which it does only
    // after the drop returned: a drop that waited for the worker would never return.
    within("dropping a batch whose read a worker holds", move || {
        drop(batch);
    });

    // The held read ends in the background once the lease is released; the read queued
    // behind it was cancelled. The worker is free again: a later read is served.
    lease.release();
    let object = locate_file(&client, &data);
    assert_eq!(client.read(&object, 0, 4).unwrap(), support::pattern(0, 4));
}

#[test]
fn cancel_completes_the_reads_that_had_not_started() {
    let dir = tempfile::tempdir().unwrap();
    let (held_path, lease) = held_file(dir.path(), "held.bin", 100);
    let data = pattern_file(dir.path(), "data.bin", 100);
    let client = isolated().file_workers(1).build().unwrap();
    let object = locate_file(&client, &data);

    // Hold the only worker on the leased file, then queue five reads behind it.
    let held = client.submit([Read::new(&locate_file(&client, &held_path), 0, 8)]);
    let _guard = LeaseGuard(lease.clone());
    wait_until_held(&held, &lease);
    let buffers: Vec<Vec<u8>> = (0..5).map(|_| vec![0xAA; 64]).collect();
    let identities: Vec<(*const u8, usize)> =
        buffers.iter().map(|b| (b.as_ptr(), b.capacity())).collect();
    let queued = client.submit(
        buffers
            .into_iter()
            .enumerate()
            .map(|(i, b)| Read::new(&object, i as u64 * 10, 10).with_buffer(b)),
    );
    assert!(matches!(queued.try_next(), Next::TimedOut));
    assert_eq!(queued.pending(), 5);

    queued.cancel();
    lease.release();

    // The running read finishes as it would have; the queued ones are cancelled, deliver
    // nothing and hand their buffers back.
    assert_held_read(&expect_completion(&held));
    let done = drain(&queued);
    assert_eq!(done.len(), 5);
    for (i, c) in done.into_iter().enumerate() {
        assert_eq!((c.index(), c.status()), (i, Status::Cancelled), "{c:?}");
        assert_eq!(c.bytes_received(), 0);
        assert!(c.bytes().is_empty());
        let buffer = c
            .into_buffer()
            .expect("a cancelled read hands its buffer back");
        assert_eq!((buffer.as_ptr(), buffer.capacity()), identities[i]);
    }
    assert!(matches!(queued.try_next(), Next::Drained));
    assert!(matches!(held.try_next(), Next::Drained));
}

#[test]
fn the_stream_is_woken_by_the_worker_without_a_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let (held, lease) = held_file(dir.path(), "held.bin", 100);
    let client = client();
    let mut batch = client.submit([
        Read::new(&locate_file(&client, &held), 0, 8).tag(1),
        Read::new(&locate_file(&client, &held), 0, 0).tag(2),
    ]);
    let _guard = LeaseGuard(lease.clone());
    let executor = TinyExecutor::new();
    assert_eq!(batch.size_hint(), (2, Some(2)));

    // The rejected read is ready at once.
    let first = executor.block_on(&mut batch.next()).unwrap();
    assert_eq!((first.tag(), first.status()), (2, Status::InvalidRange));

    // The other is held on the lease: the stream is pending and has not been woken.
    wait_until_held(&batch, &lease);
    let mut next = batch.next();
    assert!(matches!(executor.poll(&mut next), Poll::Pending));
    assert_eq!(executor.wakes(), 0);

    let writer = {
        let lease = lease.clone();
        std::thread::spawn(move || lease.release())
    };
    let second = executor.block_on(&mut next).expect("a completion");
    assert!(executor.wakes() >= 1, "the worker woke the stream");
    assert_eq!(second.tag(), 1);
    assert_held_read(&second);
    assert!(executor.block_on(&mut batch.next()).is_none());
    assert!(batch.is_terminated());
    writer.join().unwrap();
}

#[test]
fn a_batch_drains_as_a_stream_with_while_let() {
    let dir = tempfile::tempdir().unwrap();
    let path = pattern_file(dir.path(), "data.bin", 10_000);
    let client = client();
    let object = locate_file(&client, &path);
    let mut batch = client.submit((0..200u64).map(|i| Read::new(&object, i * 50, 50)));

    let mut all = futures::executor::block_on(async {
        let mut all = Vec::new();
        while let Some(done) = batch.next().await {
            all.push(done);
        }
        all
    });
    all.sort_by_key(Completion::index);
    assert_eq!(all.len(), 200);
    for (i, c) in (0..200u64).zip(&all) {
        assert_eq!((c.index() as u64, c.status()), (i, Status::Ok));
        assert_pattern(c.bytes(), i * 50, 50);
    }
}

#[test]
fn several_tasks_drain_one_batch_through_shared_references() {
    let dir = tempfile::tempdir().unwrap();
    let path = pattern_file(dir.path(), "data.bin", 64 << 10);
    let client = client();
    let object = locate_file(&client, &path);
    let batch = client.submit((0..1000u64).map(|i| Read::new(&object, i * 60, 1 + i % 60)));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let mut all: Vec<Completion> = runtime.block_on(async {
        let batch = Arc::new(batch);
        let tasks: Vec<_> = (0..4)
            .map(|_| {
                let batch = Arc::clone(&batch);
                tokio::spawn(async move { (&*batch).collect::<Vec<_>>().await })
            })
            .collect();
        let mut all = Vec::new();
        for task in tasks {
            all.extend(task.await.unwrap());
        }
        all
    });
    all.sort_by_key(Completion::index);
    let indices: Vec<u64> = all.iter().map(|c| c.index() as u64).collect();
    assert_eq!(
        indices,
        (0..1000).collect::<Vec<_>>(),
        "each read exactly once"
    );
    for (i, c) in (0..1000u64).zip(&all) {
        assert_eq!(c.status(), Status::Ok, "{c:?}");
        assert_pattern(c.bytes(), i * 60, 1 + i % 60);
    }
}
