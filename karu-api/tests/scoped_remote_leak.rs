//! A remote read into a borrowed slice, leaked with `mem::forget` while its transfer is in
//! flight: leaking is harmless. The scope registered the batch before any transfer started, so
//! it still waits until no transfer references the slice before it returns; and since a scope
//! only ever lends `&Scope`, the scope itself cannot be leaked (see the `compile_fail`
//! examples on `karu_engine::Scope`).

#[path = "support/hooks.rs"]
mod hooks;
#[path = "support/http.rs"]
mod http_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use hooks::{Count, FAMILY, HookBackend, Hooks, Latch, OpenOnDrop, SCHEME, hooks_url, within};
use http_support::{PATIENCE, build, quick, with_backend};
use karu::{BatchOptions, Read};
use karu_testkit::MockServer;

#[test]
fn a_remote_scope_waits_for_a_batch_leaked_with_mem_forget() {
    let server = MockServer::start();
    server.insert_virtual("/obj.bin", 10_000);
    // `prepare` reports that the transfer is running (active, its slice reachable), then
    // holds it there until the test lets it go.
    let entered = Count::new();
    let hold = Latch::new();
    let hooks = Hooks {
        on_prepare: Some(Box::new({
            let (entered, hold) = (Arc::clone(&entered), Arc::clone(&hold));
            move |_| {
                entered.bump();
                hold.wait();
            }
        })),
        ..Hooks::default()
    };
    let client = build(with_backend(
        quick(),
        SCHEME,
        Some(FAMILY),
        Arc::new(HookBackend(hooks)),
    ));
    let _free = OpenOnDrop(Arc::clone(&hold));
    let object = client.locate(&hooks_url(&server.url("/obj.bin"))).unwrap();

    // Once the closure is leaving, a helper lets the transfer go, recording that it does so
    // first. Its pause proves nothing; it gives a scope that failed to wait the time to
    // return first, so that the test sees `released == false`.
    let (leaving, left) = mpsc::channel::<()>();
    let released = Arc::new(AtomicBool::new(false));
    let helper = std::thread::spawn({
        let (released, hold) = (Arc::clone(&released), Arc::clone(&hold));
        move || {
            let _ = left.recv();
            std::thread::sleep(Duration::from_millis(50));
            released.store(true, Ordering::SeqCst);
            hold.open();
        }
    });

    let (slice, released_first) = within(PATIENCE, "the scope's end", {
        let released = Arc::clone(&released);
        move || {
            let mut slice = [0u8; 100];
            client.scope(|scope| {
                let leaving = leaving; // moved in: if the closure unwinds, the helper goes too
                let batch = scope.submit(
                    [Read::borrowed(&object, 0, &mut slice)],
                    &BatchOptions::new(),
                );
                entered.wait_for(1, PATIENCE);
                // The batch's drop never runs; the scope itself must wait for the transfer.
                std::mem::forget(batch);
                leaving.send(()).unwrap();
            });
            let released_first = released.load(Ordering::SeqCst);
            // The slice is the caller's again.
            (slice, released_first)
        }
    });
    assert!(
        released_first,
        "the scope returned while a transfer still referenced its borrowed slice"
    );
    // The leaked batch was cancelled by the scope's end before any byte arrived.
    assert_eq!(slice, [0u8; 100]);
    assert_eq!(server.request_count(), 0, "cancelled before it was sent");
    helper.join().unwrap();
}
