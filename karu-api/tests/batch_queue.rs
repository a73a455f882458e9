//! The completion queue: `next`, shared consumers, cancel, drop during a read, `next_async`.

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::Poll;
use std::time::Duration;

use karu::{Completion, Next, Read, Status, UNBOUNDED};
use support::{
    LeaseGuard, PATIENCE, TinyExecutor, assert_pattern, client, drain, expect_completion,
    held_file, isolated, locate, pattern_file, wait_until_active,
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
    let batch = client.submit([Read::new(&locate(&client, &held), 0, 8).tag(5)]);
    let _guard = LeaseGuard(lease.clone());

    // The worker is inside the read, waiting for the lease to be released: no completion can
    // exist, so waiting ends without one and changes nothing.
    wait_until_active(&batch, 1);
    assert!(matches!(
        batch.next(Duration::from_millis(50)),
        Next::TimedOut
    ));
    assert!(matches!(batch.try_next(), Next::TimedOut));
    assert_eq!(batch.pending(), 1);

    lease.release();
    let c = expect_completion(&batch);
    assert_eq!((c.tag(), c.index()), (5, 0));
    assert_held_read(&c);
    assert_eq!(batch.pending(), 0);
    assert!(matches!(batch.next(PATIENCE), Next::Drained));
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
    assert!(matches!(batch.next(PATIENCE), Next::Drained));
    assert!(batch.next_blocking().is_none());
    assert!(batch.wait().is_empty());
    assert!(
        TinyExecutor::new()
            .block_on(&mut batch.next_async())
            .is_none()
    );
}

#[test]
fn rejected_reads_are_queued_before_submit_returns() {
    let dir = tempfile::tempdir().unwrap();
    let path = pattern_file(dir.path(), "data.bin", 100);
    let client = client();
    let object = locate(&client, &path);
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
    let object = locate(&client, &path);

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
                    match batch.next(PATIENCE) {
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

#[test]
fn dropping_a_batch_waits_for_the_read_a_worker_is_running() {
    let dir = tempfile::tempdir().unwrap();
    let (held, lease) = held_file(dir.path(), "held.bin", 100);
    let data = pattern_file(dir.path(), "data.bin", 100);
    let client = client();
    let batch = Arc::new(client.submit([Read::new(&locate(&client, &held), 0, 8)]));
    let _guard = LeaseGuard(lease.clone());
    wait_until_active(&batch, 1);

    // The writer waits until the batch's last handle is being dropped (its strong count is 0
    // from the moment `Batch::drop` starts), records that it is about to let the worker go,
    // then lets it go. Only `weak.strong_count()` is used: upgrading would make the writer a
    // holder of the batch.
    let released = Arc::new(AtomicBool::new(false));
    let writer = {
        let weak = Arc::downgrade(&batch);
        let released = Arc::clone(&released);
        let lease = lease.clone();
        std::thread::spawn(move || {
            while weak.strong_count() > 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
            released.store(true, Ordering::SeqCst);
            lease.release();
        })
    };
    drop(batch);
    assert!(
        released.load(Ordering::SeqCst),
        "Batch::drop returned while a worker still ran one of its reads"
    );
    writer.join().unwrap();

    // The worker is free again.
    let object = locate(&client, &data);
    assert_eq!(client.read(&object, 0, 4).unwrap(), support::pattern(0, 4));
}

#[test]
fn cancel_completes_the_reads_that_had_not_started() {
    let dir = tempfile::tempdir().unwrap();
    let (held_path, lease) = held_file(dir.path(), "held.bin", 100);
    let data = pattern_file(dir.path(), "data.bin", 100);
    let client = isolated().file_workers(1).build().unwrap();
    let object = locate(&client, &data);

    // Hold the only worker on the leased file, then queue five reads behind it.
    let held = client.submit([Read::new(&locate(&client, &held_path), 0, 8)]);
    let _guard = LeaseGuard(lease.clone());
    wait_until_active(&held, 1);
    let buffers: Vec<Vec<u8>> = (0..5).map(|_| vec![0xAA; 64]).collect();
    let identities: Vec<(*const u8, usize)> =
        buffers.iter().map(|b| (b.as_ptr(), b.capacity())).collect();
    let queued = client.submit(
        buffers
            .into_iter()
            .enumerate()
            .map(|(i, b)| Read::new(&object, i as u64 * 10, 10).into_buffer(b)),
    );
    assert!(matches!(queued.try_next(), Next::TimedOut));
    assert_eq!(queued.pending(), 5);

    queued.cancel();
    lease.release();

    // The running read finishes as it would have; the queued ones are cancelled, deliver
    // nothing and hand their buffers back.
    assert_held_read(&expect_completion(&held));
    let mut done = drain(&queued);
    done.sort_by_key(Completion::index);
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
fn next_async_is_woken_by_the_worker_without_a_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let (held, lease) = held_file(dir.path(), "held.bin", 100);
    let client = client();
    let batch = client.submit([
        Read::new(&locate(&client, &held), 0, 8).tag(1),
        Read::new(&locate(&client, &held), 0, 0).tag(2),
    ]);
    let _guard = LeaseGuard(lease.clone());
    let executor = TinyExecutor::new();

    // The rejected read is ready at once.
    let first = executor.block_on(&mut batch.next_async()).unwrap();
    assert_eq!((first.tag(), first.status()), (2, Status::InvalidRange));

    // The other is held on the lease: the future is pending and has not been woken.
    wait_until_active(&batch, 1);
    let mut next = batch.next_async();
    assert!(matches!(executor.poll(&mut next), Poll::Pending));
    assert_eq!(executor.wakes(), 0);

    let writer = {
        let lease = lease.clone();
        std::thread::spawn(move || lease.release())
    };
    let second = executor.block_on(&mut next).expect("a completion");
    assert!(executor.wakes() >= 1, "the worker woke the future");
    assert_eq!(second.tag(), 1);
    assert_held_read(&second);
    assert!(executor.block_on(&mut batch.next_async()).is_none());
    writer.join().unwrap();
}

#[test]
fn next_async_drains_a_whole_batch() {
    let dir = tempfile::tempdir().unwrap();
    let path = pattern_file(dir.path(), "data.bin", 10_000);
    let client = client();
    let object = locate(&client, &path);
    let batch = client.submit((0..200u64).map(|i| Read::new(&object, i * 50, 50)));

    let mut all = TinyExecutor::new().block_on(&mut std::pin::pin!(async {
        let mut all = Vec::new();
        while let Some(c) = batch.next_async().await {
            all.push(c);
        }
        all
    }));
    all.sort_by_key(Completion::index);
    assert_eq!(all.len(), 200);
    for (i, c) in (0..200u64).zip(&all) {
        assert_eq!((c.index() as u64, c.status()), (i, Status::Ok));
        assert_pattern(c.bytes(), i * 50, 50);
    }
}
