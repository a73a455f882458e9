//! A third-party backend whose hooks the test controls: plain HTTP against the mock server
//! under the `hooks://` scheme, with a `prepare` that may panic or block, `correction` and
//! `transformed` hooks that may panic, and, optionally, a credential provider of the test's
//! own (family `"hooks"`), so the liveness of the engine around foreign code can be tested.
//!
//! Declared from test files with `#[path = "support/hooks.rs"] mod hooks;`.
#![allow(dead_code)]

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use http::HeaderMap;
use karu_engine::sdk::{
    Backend, CanonicalPath, Correction, Credential, CredentialProvider, CredentialScope,
    CredentialSource, Error, ErrorResponse, FetchContext, Locator, PrepareContext, PreparedRequest,
    Resolved, Snapshot,
};

/// The scheme the backend is registered under.
pub(crate) const SCHEME: &str = "hooks";

/// The credential family of its provider (and of application callbacks replacing it).
pub(crate) const FAMILY: &str = "hooks";

type PrepareHook = dyn Fn(&PrepareContext<'_>) + Send + Sync;

/// What the backend's hooks do; the default is a well-behaved backend.
#[derive(Default)]
pub(crate) struct Hooks {
    /// Run at the start of every `prepare` (it may panic, or block).
    pub(crate) on_prepare: Option<Box<PrepareHook>>,
    /// `correction` panics (called on error answers).
    pub(crate) panic_in_correction: bool,
    /// `correction` asks to re-authenticate on a 401 answer.
    pub(crate) reauthenticate_on_401: bool,
    /// `transformed` panics (called on every successful answer).
    pub(crate) panic_in_transformed: bool,
    /// Reads authenticate with this provider.
    pub(crate) provider: Option<Arc<dyn CredentialProvider>>,
    /// `resolve` panics for addresses that end with this text.
    pub(crate) panic_resolving: Option<&'static str>,
}

/// The backend.
pub(crate) struct HookBackend(pub(crate) Hooks);

impl fmt::Debug for HookBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HookBackend").finish_non_exhaustive()
    }
}

impl Backend for HookBackend {
    fn name(&self) -> &str {
        "hooks"
    }

    fn resolve(&self, address: &str) -> Result<Resolved, Error> {
        if let Some(end) = self.0.panic_resolving {
            assert!(!address.ends_with(end), "the test backend's resolve panics");
        }
        let url = address.replacen("hooks://", "http://", 1);
        Ok(Resolved::remote(
            CanonicalPath::new(url),
            None,
            String::new(),
        ))
    }

    fn prepare(&self, ctx: &PrepareContext<'_>) -> Result<PreparedRequest, Error> {
        if let Some(hook) = &self.0.on_prepare {
            hook(ctx);
        }
        PreparedRequest::get(ctx.locator.canonical().as_str(), ctx)
    }

    fn credential_source(
        &self,
        _locator: &Locator,
        _snapshot: &Snapshot,
    ) -> Result<Option<CredentialSource>, Error> {
        Ok(self.0.provider.as_ref().map(|provider| CredentialSource {
            scope: CredentialScope::new(FAMILY, Vec::new()),
            provider: Arc::clone(provider),
        }))
    }

    fn correction(&self, response: &ErrorResponse<'_>) -> Option<Correction> {
        assert!(
            !self.0.panic_in_correction,
            "the test backend's correction hook panics"
        );
        (self.0.reauthenticate_on_401 && response.status == 401)
            .then_some(Correction::Reauthenticate)
    }

    fn transformed(&self, _headers: &HeaderMap) -> bool {
        assert!(
            !self.0.panic_in_transformed,
            "the test backend's transformed hook panics"
        );
        false
    }
}

/// `hooks://` for an `http://` URL of the mock server.
pub(crate) fn hooks_url(http_url: &str) -> String {
    http_url.replacen("http://", "hooks://", 1)
}

/// A gate that blocks whoever waits on it until it is opened (once, for good).
#[derive(Debug, Default)]
pub(crate) struct Latch {
    open: Mutex<bool>,
    opened: Condvar,
}

impl Latch {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Latch::default())
    }

    /// Let every waiter (present and future) go.
    pub(crate) fn open(&self) {
        *lock(&self.open) = true;
        self.opened.notify_all();
    }

    /// Wait until opened.
    pub(crate) fn wait(&self) {
        let mut open = lock(&self.open);
        while !*open {
            open = self
                .opened
                .wait(open)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }
}

/// Opens its latch when dropped: declared after the client, it frees a hook the test left
/// blocked when an assertion fails, so the test fails instead of hanging in a drop.
#[derive(Debug)]
pub(crate) struct OpenOnDrop(pub(crate) Arc<Latch>);

impl Drop for OpenOnDrop {
    fn drop(&mut self) {
        self.0.open();
    }
}

/// A counter that can be waited on.
#[derive(Debug, Default)]
pub(crate) struct Count {
    n: Mutex<u64>,
    changed: Condvar,
}

impl Count {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Count::default())
    }

    /// Add one; returns the new value.
    pub(crate) fn bump(&self) -> u64 {
        let mut n = lock(&self.n);
        *n += 1;
        self.changed.notify_all();
        *n
    }

    pub(crate) fn get(&self) -> u64 {
        *lock(&self.n)
    }

    /// Wait until the count reaches `n`, failing the test after `patience`.
    #[track_caller]
    pub(crate) fn wait_for(&self, n: u64, patience: Duration) {
        let give_up = Instant::now() + patience;
        let mut count = lock(&self.n);
        while *count < n {
            let left = give_up.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "the count reached {} of {n} within {patience:?}",
                *count
            );
            count = self
                .changed
                .wait_timeout(count, left)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
    }
}

/// Lock, ignoring poisoning (a hook that panicked on purpose may poison nothing we rely on).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A provider of the test's own: each call is counted, then does what `behaviour` says with
/// the call's number (1 for the first).
pub(crate) struct TestProvider {
    pub(crate) calls: Arc<Count>,
    behaviour: Box<dyn Fn(u64) -> Result<Credential, Error> + Send + Sync>,
}

impl TestProvider {
    pub(crate) fn new(
        behaviour: impl Fn(u64) -> Result<Credential, Error> + Send + Sync + 'static,
    ) -> Arc<Self> {
        Arc::new(TestProvider {
            calls: Count::new(),
            behaviour: Box::new(behaviour),
        })
    }
}

impl fmt::Debug for TestProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TestProvider")
            .field("calls", &self.calls.get())
            .finish_non_exhaustive()
    }
}

impl CredentialProvider for TestProvider {
    fn fetch(&self, _ctx: &FetchContext) -> Result<Credential, Error> {
        let n = self.calls.bump();
        (self.behaviour)(n)
    }
}

/// A credential whose secret is the call that produced it.
pub(crate) fn numbered(n: u64) -> Credential {
    Credential::new(n)
}

/// Counts something across threads without waiting (for hooks that only need a number).
pub(crate) fn counter() -> Arc<AtomicU64> {
    Arc::new(AtomicU64::new(0))
}

/// Read a counter.
pub(crate) fn load(counter: &AtomicU64) -> u64 {
    counter.load(Ordering::SeqCst)
}

/// Run `f` on a thread of its own and return what it returns (or re-raise its panic), failing
/// the test if it has not returned within `patience`: a hang becomes a failure. The stuck
/// thread is left behind.
#[track_caller]
pub(crate) fn within<T: Send + 'static>(
    patience: Duration,
    what: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (done, outcome) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)));
    });
    match outcome.recv_timeout(patience) {
        Ok(Ok(value)) => value,
        Ok(Err(panic)) => std::panic::resume_unwind(panic),
        Err(_) => panic!("{what} did not return within {patience:?}"),
    }
}
