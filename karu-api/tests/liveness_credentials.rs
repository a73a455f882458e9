//! Credential lookups never hold a read past its deadline and never stall their scope: a
//! provider that panics fails the reads waiting for it with `Credentials` and the scope works
//! again; a provider that never returns fails them with `TimedOut` at their deadline (first
//! lookup and re-authentication alike), and once it returns its result serves later reads;
//! and concurrent cold reads under one cacheable callback prefix call the callback once.
//!
//! The backend is a third-party one (`support/hooks.rs`) whose provider the test controls.

#[path = "support/hooks.rs"]
mod hooks;
#[path = "support/http.rs"]
mod http_support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hooks::{
    Count, FAMILY, HookBackend, Hooks, Latch, OpenOnDrop, SCHEME, TestProvider, hooks_url,
    numbered, within,
};
use http_support::{
    PATIENCE, assert_failed, assert_ok, build, drain, quick, read_one, with_backend,
};
use karu::{
    BatchOptions, CallbackCredential, CanonicalPath, Client, ClientBuilder, Credential, Locator,
    Read, Status,
};
use karu_testkit::{Fault, FaultRule, MockServer};

const SIZE: u64 = 100_000;

/// The numbers of the credentials `prepare` was given, in order.
type Seen = Arc<Mutex<Vec<u64>>>;

/// A builder for the hooks backend authenticating with `provider` (recording the credential
/// each `prepare` sees), and what it records.
fn builder(provider: Arc<TestProvider>, hooks: Hooks) -> (ClientBuilder, Seen) {
    let seen: Seen = Arc::default();
    let record = Arc::clone(&seen);
    let hooks = Hooks {
        provider: Some(provider),
        on_prepare: Some(Box::new(move |ctx| {
            let n = ctx
                .credential
                .and_then(|c| c.get::<u64>())
                .copied()
                .unwrap_or(0);
            record.lock().unwrap().push(n);
        })),
        ..hooks
    };
    let builder = with_backend(quick(), SCHEME, Some(FAMILY), Arc::new(HookBackend(hooks)));
    (builder, seen)
}

fn server(objects: usize) -> MockServer {
    let server = MockServer::start();
    for i in 0..objects {
        server.insert_virtual(&format!("/o{i}.bin"), SIZE);
    }
    server
}

fn locate(client: &Client, server: &MockServer, i: usize) -> Locator {
    client
        .locate(&hooks_url(&server.url(&format!("/o{i}.bin"))))
        .unwrap()
}

/// Wait (polling the client's counters) until `done` holds, failing after [`PATIENCE`].
#[track_caller]
fn wait_for_stats(client: &Client, what: &str, done: impl Fn(&karu::CredentialStats) -> bool) {
    let give_up = Instant::now() + PATIENCE;
    loop {
        let stats = client.credential_stats();
        if done(&stats) {
            return;
        }
        assert!(Instant::now() < give_up, "{what}: {stats:?}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn a_panicking_provider_fails_the_reads_waiting_for_it_with_credentials_then_the_scope_works() {
    let server = server(4);
    let provider = TestProvider::new(|n| {
        assert!(n > 1, "the test provider panics on its first call");
        Ok(numbered(n))
    });
    let (builder, seen) = builder(Arc::clone(&provider), Hooks::default());
    let client = build(builder);
    let objects: Vec<Locator> = (0..4).map(|i| locate(&client, &server, i)).collect();
    let (client, first) = within(PATIENCE, "reads waiting on a panicking provider", {
        let objects = objects.clone();
        move || {
            let batch = client.submit(objects.iter().map(|o| Read::new(o, 0, 10)));
            let done = drain(&batch);
            (client, done)
        }
    });
    for c in &first {
        assert_failed(c, Status::Credentials);
    }
    assert_eq!(provider.calls.get(), 1, "one lookup; its failure is shared");
    assert_eq!(server.request_count(), 0, "nothing was sent unsigned");

    // The failure was not cached, and no lookup stayed in flight: the next read looks up again.
    let c = within(PATIENCE, "a read after the panic", {
        let object = objects[0].clone();
        move || read_one(&client, &object, 100, 10)
    });
    assert_ok(&c, 100, 10);
    assert_eq!(provider.calls.get(), 2);
    assert_eq!(
        *seen.lock().unwrap(),
        [2],
        "signed with the second lookup's credential"
    );
}

#[test]
fn a_lookup_that_never_returns_fails_reads_with_timed_out_at_their_deadline() {
    const DEADLINE: Duration = Duration::from_millis(300);
    let server = server(1);
    let hung = Latch::new();
    let provider = TestProvider::new({
        let hung = Arc::clone(&hung);
        move |n| {
            hung.wait();
            Ok(numbered(n))
        }
    });
    let (builder, seen) = builder(Arc::clone(&provider), Hooks::default());
    let client = build(builder.set("retry.deadline", "300ms"));
    let _free = OpenOnDrop(Arc::clone(&hung)); // frees the provider if an assertion fails
    let object = locate(&client, &server, 0);

    let (client, first, second) = within(PATIENCE, "reads of a hung lookup", {
        let object = object.clone();
        move || {
            let started = Instant::now();
            let first = read_one(&client, &object, 0, 10);
            let waited = started.elapsed();
            // The lookup still hangs: a later read waits for the same one (it is never
            // called twice in parallel), and also ends at its own deadline.
            let second = read_one(&client, &object, 10, 10);
            ((client, waited), first, second)
        }
    });
    let (client, waited) = client;
    assert_failed(&first, Status::TimedOut);
    assert_failed(&second, Status::TimedOut);
    assert!(waited >= DEADLINE, "failed before its deadline: {waited:?}");
    assert_eq!(provider.calls.get(), 1, "the hung lookup was not repeated");
    assert_eq!(
        client.credential_stats().waits,
        1,
        "the second read joined it"
    );
    assert_eq!(server.request_count(), 0);

    // Once the lookup returns, its credential serves the scope.
    hung.open();
    wait_for_stats(&client, "the hung lookup landing", |s| s.lookups == 1);
    let third = read_one(&client, &object, 20, 10);
    assert_ok(&third, 20, 10);
    assert_eq!(provider.calls.get(), 1);
    assert_eq!(*seen.lock().unwrap(), [1]);
}

#[test]
fn re_authentication_that_never_returns_fails_the_read_with_timed_out_at_its_deadline() {
    let server = server(1);
    // The first request is refused as expired: the backend asks to re-authenticate.
    server.add_fault(
        FaultRule::new(Fault::Status {
            code: 401,
            retry_after: None,
        })
        .times(1),
    );
    let hung = Latch::new();
    let provider = TestProvider::new({
        let hung = Arc::clone(&hung);
        move |n| {
            if n == 2 {
                hung.wait();
            }
            Ok(numbered(n))
        }
    });
    let hooks = Hooks {
        reauthenticate_on_401: true,
        ..Hooks::default()
    };
    let (builder, seen) = builder(Arc::clone(&provider), hooks);
    let client = build(builder.set("retry.deadline", "400ms"));
    let _free = OpenOnDrop(Arc::clone(&hung));
    let object = locate(&client, &server, 0);

    let (client, first) = within(PATIENCE, "a read re-authenticating with a hung lookup", {
        let object = object.clone();
        move || {
            let first = read_one(&client, &object, 0, 10);
            (client, first)
        }
    });
    assert_failed(&first, Status::TimedOut);
    assert_eq!(
        provider.calls.get(),
        2,
        "the first lookup, then the hung one"
    );
    assert_eq!(server.request_count(), 1, "the refused request only");

    hung.open();
    wait_for_stats(&client, "the re-authentication landing", |s| s.lookups == 2);
    assert_ok(&read_one(&client, &object, 10, 10), 10, 10);
    assert_eq!(
        *seen.lock().unwrap(),
        [1, 2],
        "the refused request, then the fresh credential"
    );
}

#[test]
fn concurrent_cold_reads_under_one_callback_prefix_call_it_once() {
    const READS: usize = 16;
    let server = server(READS);
    let prefix = server.base_url();
    let calls = Count::new();
    let hold = Latch::new();
    let callback = {
        let (calls, hold) = (Arc::clone(&calls), Arc::clone(&hold));
        move |path: &CanonicalPath| {
            assert!(path.as_str().starts_with(&prefix), "{path}");
            calls.bump();
            // Hold the call in flight while the other reads arrive.
            hold.wait();
            Ok(CallbackCredential::for_prefix(
                Credential::new(7u64),
                prefix.clone(),
            ))
        }
    };
    // Native discovery must not run: the callback replaces it for the family.
    let provider = TestProvider::new(|_| panic!("native discovery ran for a callback family"));
    let (builder, seen) = builder(provider, Hooks::default());
    let client = build(builder.credential_callback(FAMILY, callback));
    let _free = OpenOnDrop(Arc::clone(&hold));
    let objects: Vec<Locator> = (0..READS).map(|i| locate(&client, &server, i)).collect();

    let batch = client.submit_with(
        objects.iter().map(|o| Read::new(o, 50, 100)),
        &BatchOptions::new(),
    );
    // Every other read has joined the call in flight before it lands.
    wait_for_stats(&client, "the other reads joining the call", |s| {
        s.waits == READS as u64 - 1
    });
    hold.open();
    for c in drain(&batch) {
        assert_ok(&c, 50, 100);
    }
    assert_eq!(calls.get(), 1, "single flight");
    let stats = client.credential_stats();
    assert_eq!(
        (stats.callback_calls, stats.hits, stats.lookups),
        (1, READS as u64 - 1, 0),
        "{stats:?}"
    );
    assert_eq!(*seen.lock().unwrap(), [7; READS]);
}

#[test]
fn a_panicking_callback_fails_its_read_with_credentials_and_the_family_recovers() {
    let server = server(1);
    let prefix = server.base_url();
    let calls = Count::new();
    let callback = {
        let calls = Arc::clone(&calls);
        move |_: &CanonicalPath| {
            assert!(
                calls.bump() > 1,
                "the test callback panics on its first call"
            );
            Ok(CallbackCredential::for_prefix(
                Credential::new(9u64),
                prefix.clone(),
            ))
        }
    };
    let provider = TestProvider::new(|_| panic!("native discovery ran for a callback family"));
    let (builder, seen) = builder(provider, Hooks::default());
    let client = build(builder.credential_callback(FAMILY, callback));
    let object = locate(&client, &server, 0);
    assert_failed(&read_one(&client, &object, 0, 10), Status::Credentials);
    assert_ok(&read_one(&client, &object, 0, 10), 0, 10);
    assert_ok(&read_one(&client, &object, 10, 10), 10, 10);
    assert_eq!(calls.get(), 2, "called again after the panic, then cached");
    assert_eq!(*seen.lock().unwrap(), [9, 9]);
}

/// A credential file a user names that is no regular file (a FIFO without a writer, a device)
/// fails the reads that need it at once with `Credentials`, naming the file and why, before
/// any request, instead of holding a credential worker forever (the FIFO) or filling memory
/// (`/dev/zero`).
#[test]
fn credential_files_that_are_no_regular_files_fail_their_reads_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("credentials.fifo");
    karu_testkit::make_fifo(&fifo);
    let server = MockServer::start();
    for file in [fifo.to_str().unwrap(), "/dev/zero"] {
        let cases = [
            (
                quick()
                    .set("gcs.endpoint", server.base_url())
                    .set("gcs.credentials_file", file),
                "gs://bucket/object".to_string(),
                format!("the credentials file {file} cannot be read: not a regular file"),
            ),
            (
                quick()
                    .set("hf.endpoint", server.base_url())
                    .environment([("HF_TOKEN_PATH", file)]),
                "hf://datasets/owner/repo/file.bin".to_string(),
                format!("cannot read the Hugging Face token file {file}: not a regular file"),
            ),
        ];
        for (builder, address, expected) in cases {
            let client = build(builder);
            let object = client.locate(&address).unwrap();
            let c = read_one(&client, &object, 0, 10);
            assert_failed(&c, Status::Credentials);
            let message = c.error().unwrap().to_string();
            assert!(message.contains(&expected), "{message}");
        }
    }
    assert_eq!(server.request_count(), 0);
}
