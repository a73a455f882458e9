//! Cancellation without waiting: a future of the async API dropped mid-flight cancels its
//! request (the mock sees the connection go), and an owned batch dropped while its transfer is
//! held (at the mock's barrier, or inside a backend hook) returns at once; the transfer ends in
//! the background and the engine goes on serving reads.

#[path = "support/hooks.rs"]
mod hooks;
#[path = "support/http.rs"]
mod http_support;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use hooks::{Count, FAMILY, HookBackend, Hooks, Latch, OpenOnDrop, SCHEME, hooks_url, within};
use http_support::{PATIENCE, assert_pattern, build, eventually, locate, quick, with_backend};
use karu::{Read, Status};
use karu_testkit::{Fault, FaultRule, MockServer};

/// Poll `future` once, with a waker that does nothing: whatever it started goes on on Karu's
/// threads, unpolled.
fn poll_once<F: Future + ?Sized>(future: &mut Pin<Box<F>>) -> Poll<F::Output> {
    future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
}

#[test]
fn futures_dropped_mid_flight_cancel_their_requests() {
    let server = MockServer::start();
    server.insert_virtual("/held.bin", 100_000);
    server.insert_virtual("/free.bin", 100_000);
    server.add_fault(FaultRule::new(Fault::NeverAnswer).path("/held.bin"));
    let client = build(quick());
    let held = locate(&client, &server, "/held.bin");

    // Each future sends its requests (read_ends: the head and the suffix together), is
    // dropped while the server holds them, and the server then sees them go.
    let mut expected = 0;
    for (what, requests) in [("read_async", 1), ("stat_async", 1), ("read_ends_async", 2)] {
        let mut future: Pin<Box<dyn Future<Output = Status> + Send>> = match what {
            "read_async" => {
                let f = client.read_async(&held, 10, 1000);
                Box::pin(async move { f.await.map_or_else(|e| e.status(), |_| Status::Ok) })
            }
            "stat_async" => {
                let f = client.stat_async(&held);
                Box::pin(async move { f.await.map_or_else(|e| e.status(), |_| Status::Ok) })
            }
            _ => {
                let f = client.read_ends_async(&held, 10, 10);
                Box::pin(async move { f.await.map_or_else(|e| e.status(), |_| Status::Ok) })
            }
        };
        assert!(poll_once(&mut future).is_pending(), "{what}");
        expected += requests;
        eventually(&format!("{what}'s requests reach the server"), || {
            server.request_count() == expected && server.in_flight() == requests as u64
        });
        drop(future);
        eventually(&format!("{what}'s requests are cancelled"), || {
            server.in_flight() == 0
        });
    }
    // None of them was answered; nothing was sent again.
    let log = server.requests();
    assert_eq!(log.len(), 4, "{log:#?}");
    assert!(log.iter().all(|r| r.status == 0), "{log:#?}");

    // The engine goes on.
    let free = locate(&client, &server, "/free.bin");
    assert_pattern(&client.read(&free, 500, 500).unwrap(), 500, 500);
}

#[test]
fn dropping_an_owned_batch_returns_while_its_request_is_held_at_the_barrier() {
    let server = MockServer::start();
    server.insert_virtual("/obj.bin", 100_000);
    // A request is held until a second one arrives.
    server.add_fault(FaultRule::new(Fault::Barrier(2)).path("/obj.bin"));
    // One transfer at a time: the next read can only start once the dropped batch's transfer
    // has ended and given its permit back.
    let client = build(quick().concurrency(1));
    let object = locate(&client, &server, "/obj.bin");

    let batch = client.submit([Read::new(&object, 0, 1000)]);
    eventually("the request reaches the barrier", || {
        server.in_flight() == 1
    });
    within(PATIENCE, "dropping the batch", move || drop(batch));
    // The request was cancelled while the server still held it.
    eventually("the held request is abandoned", || server.in_flight() == 0);

    // The engine stays healthy: the next read is the barrier's second arrival.
    assert_pattern(&client.read(&object, 2000, 100).unwrap(), 2000, 100);
    let log = server.requests();
    assert_eq!(log.len(), 2, "{log:#?}");
    assert_eq!(log[0].byte_range, Some((0, 999)));
    assert_eq!(
        (log[1].byte_range, log[1].status),
        (Some((2000, 2099)), 206)
    );
}

#[test]
fn dropping_an_owned_batch_returns_while_a_backend_hook_holds_its_transfer() {
    let server = MockServer::start();
    server.insert_virtual("/obj.bin", 100_000);
    // `prepare` reports that the transfer is running, then holds it until the test lets it
    // go: the transfer is active, and cannot see its batch's cancellation meanwhile.
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
        quick().concurrency(1),
        SCHEME,
        Some(FAMILY),
        Arc::new(HookBackend(hooks)),
    ));
    let _free = OpenOnDrop(Arc::clone(&hold));
    let object = client.locate(&hooks_url(&server.url("/obj.bin"))).unwrap();

    let batch = client.submit([Read::new(&object, 0, 1000)]);
    entered.wait_for(1, PATIENCE);
    // The hook is let go only after the drop returned: a drop that waited for the transfer
    // would never return.
    within(PATIENCE, "dropping the batch", move || drop(batch));
    hold.open();

    // The transfer ends in the background, cancelled before it sent anything, and gives its
    // permit back: the next read (the only permit) is served.
    assert_pattern(&client.read(&object, 5000, 10).unwrap(), 5000, 10);
    let log = server.requests();
    assert_eq!(log.len(), 1, "{log:#?}");
    assert_eq!(log[0].byte_range, Some((5000, 5009)));
}
