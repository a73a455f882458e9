//! A third-party backend that panics in one of its hooks (`prepare`, `correction`,
//! `transformed`, `credential_source`, or `resolve` for `locate`) fails that read (or that
//! address) alone with `Internal`: every read still gets exactly one completion, the batch and
//! its scope can end (nothing stays active), and the client's event loops go on serving other
//! reads.

#[path = "support/hooks.rs"]
mod hooks;
#[path = "support/http.rs"]
mod http_support;

use std::sync::Arc;

use hooks::{FAMILY, HookBackend, Hooks, SCHEME, hooks_url, within};
use http_support::{PATIENCE, assert_ok, build, drain, isolated, quick, with_backend};
use karu::{BatchOptions, Client, Locator, Read, Status};
use karu_engine::sdk;
use karu_testkit::{Fault, FaultRule, MockServer, pattern};

const SIZE: u64 = 10_000;

/// A mock with `/good.bin` and `/bad.bin`.
fn server() -> MockServer {
    let server = MockServer::start();
    server.insert_virtual("/good.bin", SIZE);
    server.insert_virtual("/bad.bin", SIZE);
    server
}

/// A client of the hooks backend, without hedging: the tests count the requests it sends.
fn client(hooks: Hooks) -> Client {
    build(with_backend(
        karu_testkit::reads::without_hedging(quick()),
        SCHEME,
        Some(FAMILY),
        Arc::new(HookBackend(hooks)),
    ))
}

fn locate(client: &Client, server: &MockServer, path: &str) -> Locator {
    client.locate(&hooks_url(&server.url(path))).unwrap()
}

/// Hooks whose `prepare` panics for `/bad.bin`.
fn panics_preparing_bad() -> Hooks {
    Hooks {
        on_prepare: Some(Box::new(|ctx| {
            assert!(
                !ctx.locator.canonical().as_str().ends_with("/bad.bin"),
                "the test backend's prepare panics for bad.bin"
            );
        })),
        ..Hooks::default()
    }
}

/// The paths the server was asked for, in order.
fn paths(server: &MockServer) -> Vec<String> {
    server.requests().into_iter().map(|r| r.path).collect()
}

#[test]
fn a_panicking_prepare_fails_its_read_internal_and_the_batch_drops() {
    let server = server();
    let client = client(panics_preparing_bad());
    let (good, bad) = (
        locate(&client, &server, "/good.bin"),
        locate(&client, &server, "/bad.bin"),
    );
    let (client, done) = within(PATIENCE, "a batch whose prepare panicked", move || {
        let batch = client.submit([Read::new(&bad, 0, 100), Read::new(&good, 10, 100)]);
        let done = drain(&batch);
        // Dropping waits until no transfer of the batch is active: it must return.
        drop(batch);
        (client, done)
    });
    assert_eq!(done[0].status(), Status::Internal, "{:?}", done[0]);
    assert_eq!(done[0].bytes_received(), 0);
    assert_ok(&done[1], 10, 100);
    assert_eq!(
        paths(&server),
        ["/good.bin"],
        "nothing was sent for bad.bin"
    );

    // The event loop that ran the panicking transfer goes on: many more reads, each once.
    let good = locate(&client, &server, "/good.bin");
    let batch = client.submit_with(
        (0..32).map(|i| Read::new(&good, i * 100, 50)),
        &BatchOptions::new().max_gap(0),
    );
    for (i, c) in drain(&batch).iter().enumerate() {
        assert_ok(c, i as u64 * 100, 50);
    }
    karu_testkit::reads::assert_requests(&server.requests(), 33);
    within(PATIENCE, "dropping the client", move || drop(client));
}

#[test]
fn a_panicking_prepare_inside_a_scope_lets_the_scope_end() {
    let server = server();
    let client = client(panics_preparing_bad());
    let (good, bad) = (
        locate(&client, &server, "/good.bin"),
        locate(&client, &server, "/bad.bin"),
    );
    let (statuses, filled) = within(PATIENCE, "a scope whose prepare panicked", move || {
        let mut bad_slice = [0u8; 100];
        let mut good_slice = [0u8; 100];
        let statuses = client.scope(|scope| {
            let batch = scope.submit(
                [
                    Read::borrowed(&bad, 0, &mut bad_slice),
                    Read::borrowed(&good, 10, &mut good_slice),
                ],
                &BatchOptions::new(),
            );
            drain(&batch)
                .iter()
                .map(|c| (c.status(), c.bytes_received()))
                .collect::<Vec<_>>()
        });
        // The scope returned: no transfer references either slice any more.
        (statuses, good_slice)
    });
    assert_eq!(
        statuses,
        [(Status::Internal, 0), (Status::Ok, 100)],
        "one completion each"
    );
    assert_eq!(filled.to_vec(), pattern(10, 100));
}

#[test]
fn panicking_correction_and_transformed_hooks_fail_their_reads_internal() {
    let server = server();
    // `correction` is asked after an error answer: a 500 on the first request.
    server.add_fault(FaultRule::new(Fault::Status {
        code: 500,
        retry_after: None,
    }));
    let correction = client(Hooks {
        panic_in_correction: true,
        ..Hooks::default()
    });
    let object = locate(&correction, &server, "/good.bin");
    let done = within(
        PATIENCE,
        "a read whose correction hook panicked",
        move || {
            let batch = correction.submit([Read::new(&object, 0, 10)]);
            let done = drain(&batch);
            drop(batch);
            done
        },
    );
    assert_eq!(done[0].status(), Status::Internal, "{:?}", done[0]);
    assert_eq!(server.request_count(), 1, "not retried");

    // `transformed` is asked on every successful answer.
    server.clear_faults();
    let transformed = client(Hooks {
        panic_in_transformed: true,
        ..Hooks::default()
    });
    let object = locate(&transformed, &server, "/good.bin");
    let done = within(
        PATIENCE,
        "a read whose transformed hook panicked",
        move || {
            let batch =
                transformed.submit([Read::new(&object, 0, 10), Read::new(&object, 5000, 10)]);
            let done = drain(&batch);
            drop(batch);
            done
        },
    );
    assert_eq!(
        done.iter().map(|c| c.status()).collect::<Vec<_>>(),
        [Status::Internal, Status::Internal]
    );
}

#[test]
fn probes_of_a_panicking_backend_fail_internal() {
    let server = server();
    let client = client(panics_preparing_bad());
    let bad = locate(&client, &server, "/bad.bin");
    let good = locate(&client, &server, "/good.bin");
    let (client, stat, ends) = within(PATIENCE, "probes whose prepare panicked", move || {
        let stat = client.stat(&bad).map(|i| i.size);
        let ends = client.read_ends(&bad, 10, 10).map(|e| e.size);
        (client, stat, ends)
    });
    assert_eq!(stat.unwrap_err().status(), Status::Internal);
    assert_eq!(ends.unwrap_err().status(), Status::Internal);
    assert_eq!(client.stat(&good).unwrap().size, Some(SIZE));
}

/// A backend whose `credential_source` panics: called on the submitting thread, it must not
/// unwind into the caller; the read fails alone.
#[derive(Debug)]
struct PanickingSource;

impl sdk::Backend for PanickingSource {
    fn name(&self) -> &str {
        "panicking-source"
    }

    fn resolve(&self, address: &str) -> Result<sdk::Resolved, sdk::Error> {
        HookBackend(Hooks::default()).resolve(address)
    }

    fn credential_source(
        &self,
        _locator: &Locator,
        _snapshot: &sdk::Snapshot,
    ) -> Result<Option<sdk::CredentialSource>, sdk::Error> {
        panic!("the test backend's credential_source panics")
    }
}

#[test]
fn a_panicking_credential_source_fails_its_read_without_unwinding_into_submit() {
    let server = server();
    let client = build(with_backend(
        isolated(),
        SCHEME,
        None,
        Arc::new(PanickingSource),
    ));
    let object = locate(&client, &server, "/good.bin");
    let batch = client.submit([Read::new(&object, 0, 10)]);
    let done = drain(&batch);
    assert_eq!(done[0].status(), Status::Internal, "{:?}", done[0]);
    assert_eq!(server.request_count(), 0);
}

#[test]
fn a_backend_that_panics_resolving_fails_that_address_alone_with_internal() {
    let server = server();
    let client = client(Hooks {
        panic_resolving: Some("/bad.bin"),
        ..Hooks::default()
    });
    let error = client
        .locate(&hooks_url(&server.url("/bad.bin")))
        .expect_err("a panicking resolve is an error, not an unwind");
    assert_eq!(error.status(), Status::Internal, "{error}");
    // The client goes on: other addresses of that backend resolve and read.
    let good = locate(&client, &server, "/good.bin");
    assert_eq!(client.read(&good, 0, 16).unwrap(), pattern(0, 16));
    assert_eq!(paths(&server), ["/good.bin"]);
}
