//! Borrowed destinations: a scope returns or unwinds only once no worker references its slices.

mod support;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use karu::{BatchOptions, Read, Status};
use support::{
    Lease, LeaseGuard, client, held_file, locate_file, pattern, pattern_file, wait_until_held,
};

#[test]
fn a_scope_fills_borrowed_slices_with_exact_bytes() {
    const LEN: u64 = 10_000;
    let dir = tempfile::tempdir().unwrap();
    let path = pattern_file(dir.path(), "data.bin", LEN);
    let client = client();
    let object = locate_file(&client, &path);
    let window = object.with_window(2000, Some(100)).unwrap();

    let mut a = [0u8; 100];
    let mut b = vec![0u8; 4096];
    let mut c = [0u8; 1];
    let mut short = [0xEEu8; 64];
    let mut windowed = [0u8; 30];
    let mut second = [0u8; 7];
    let statuses = client.scope(|scope| {
        let batch = scope.submit(
            [
                Read::borrowed(&object, 0, &mut a),
                Read::borrowed(&object, 5000, &mut b),
                Read::borrowed(&object, LEN - 1, &mut c),
                Read::borrowed(&object, LEN - 10, &mut short),
                Read::borrowed(&window, 70, &mut windowed),
            ],
            &BatchOptions::new(),
        );
        let first: Vec<(Status, u64, usize)> = batch
            .wait()
            .iter()
            .map(|c| (c.status(), c.bytes_received(), c.bytes().len()))
            .collect();
        // A second batch in the same scope.
        let other = scope.submit(
            [Read::borrowed(&object, 77, &mut second)],
            &BatchOptions::new(),
        );
        assert!(other.wait()[0].is_ok());
        first
    });
    // Borrowed destinations hold the bytes; completions carry none.
    assert_eq!(
        statuses,
        vec![
            (Status::Ok, 100, 0),
            (Status::Ok, 4096, 0),
            (Status::Ok, 1, 0),
            (Status::RangeNotSatisfiable, 10, 0),
            (Status::Ok, 30, 0),
        ]
    );
    assert_eq!(a.to_vec(), pattern(0, 100));
    assert_eq!(b, pattern(5000, 4096));
    assert_eq!(c.to_vec(), pattern(LEN - 1, 1));
    assert_eq!(
        short[..10].to_vec(),
        pattern(LEN - 10, 10),
        "the valid prefix"
    );
    assert_eq!(windowed.to_vec(), pattern(2070, 30));
    assert_eq!(second.to_vec(), pattern(77, 7));
}

#[test]
fn read_into_fills_the_slice_or_fails() {
    let dir = tempfile::tempdir().unwrap();
    let path = pattern_file(dir.path(), "data.bin", 1000);
    let client = client();
    let object = locate_file(&client, &path);

    let mut buf = [0u8; 5];
    client.read_into(&object, 10, &mut buf).unwrap();
    assert_eq!(buf.to_vec(), pattern(10, 5));
    let mut big = vec![0u8; 1000];
    client.read_into(&object, 0, &mut big).unwrap();
    assert_eq!(big, pattern(0, 1000));

    let mut past = [0u8; 10];
    let err = client.read_into(&object, 995, &mut past).unwrap_err();
    assert_eq!(err.status(), Status::RangeNotSatisfiable);
    let err = client.read_into(&object, 0, &mut []).unwrap_err();
    assert_eq!(err.status(), Status::InvalidRange);
    let missing = locate_file(&client, &dir.path().join("missing"));
    let err = client.read_into(&missing, 0, &mut buf).unwrap_err();
    assert_eq!(err.status(), Status::NotFound);
}

/// A thread that lets the worker held on `lease` go once the scope's closure says it is about
/// to leave (or has unwound), recording that it does so just before.
///
/// After the signal it pauses briefly: the pause proves nothing, it only gives a scope that
/// failed to wait the time to return first, so that the test sees `released == false`.
fn release_after_signal(lease: Lease) -> (mpsc::Sender<()>, Arc<AtomicBool>, JoinHandle<()>) {
    let (signal, leaving) = mpsc::channel::<()>();
    let released = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&released);
    let releaser = std::thread::spawn(move || {
        // A closed channel (the closure unwound before sending) also means "leaving".
        let _ = leaving.recv();
        std::thread::sleep(Duration::from_millis(50));
        flag.store(true, Ordering::SeqCst);
        lease.release();
    });
    (signal, released, releaser)
}

#[test]
fn a_scope_waits_for_a_batch_leaked_with_mem_forget() {
    let dir = tempfile::tempdir().unwrap();
    let (held, lease) = held_file(dir.path(), "held.bin", 100);
    let client = client();
    let object = locate_file(&client, &held);
    let (signal, released, releaser) = release_after_signal(lease.clone());
    let _guard = LeaseGuard(lease.clone());

    let mut slice = [0u8; 8];
    client.scope(|scope| {
        let signal = signal; // moved in: if the closure unwinds early, the releaser still goes
        let batch = scope.submit(
            [Read::borrowed(&object, 0, &mut slice)],
            &BatchOptions::new(),
        );
        wait_until_held(&batch, &lease);
        // The batch's drop never runs; the scope itself must wait for the worker.
        std::mem::forget(batch);
        signal.send(()).unwrap();
    });
    assert!(
        released.load(Ordering::SeqCst),
        "the scope returned while a worker still referenced a borrowed slice"
    );
    releaser.join().unwrap();
}

#[test]
fn dropping_a_scoped_batch_waits_for_the_read_a_worker_is_running() {
    let dir = tempfile::tempdir().unwrap();
    let (held, lease) = held_file(dir.path(), "held.bin", 100);
    let client = client();
    let object = locate_file(&client, &held);
    let (signal, released, releaser) = release_after_signal(lease.clone());
    let _guard = LeaseGuard(lease.clone());

    let mut slice = [0u8; 8];
    client.scope(|scope| {
        let signal = signal;
        let batch = scope.submit(
            [Read::borrowed(&object, 0, &mut slice)],
            &BatchOptions::new(),
        );
        wait_until_held(&batch, &lease);
        signal.send(()).unwrap();
        // Unlike an owned batch's, this drop waits: the worker references `slice`.
        drop(batch);
        assert!(
            released.load(Ordering::SeqCst),
            "a scoped batch's drop returned while a worker still referenced a borrowed slice"
        );
    });
    releaser.join().unwrap();
}

#[test]
fn a_panic_in_a_scope_propagates_after_the_wait() {
    let dir = tempfile::tempdir().unwrap();
    let (held, lease) = held_file(dir.path(), "held.bin", 100);
    let client = client();
    let object = locate_file(&client, &held);
    let (signal, released, releaser) = release_after_signal(lease.clone());
    let _guard = LeaseGuard(lease.clone());

    let mut slice = [0u8; 8];
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        client.scope(|scope| {
            let signal = signal;
            let batch = scope.submit(
                [Read::borrowed(&object, 0, &mut slice)],
                &BatchOptions::new(),
            );
            wait_until_held(&batch, &lease);
            signal.send(()).unwrap();
            panic!("boom inside the scope");
        })
    }));
    assert!(
        released.load(Ordering::SeqCst),
        "the scope unwound while a worker still referenced a borrowed slice"
    );
    let payload = outcome.expect_err("the panic propagates out of the scope");
    assert_eq!(
        payload.downcast_ref::<&str>(),
        Some(&"boom inside the scope")
    );
    releaser.join().unwrap();
}
