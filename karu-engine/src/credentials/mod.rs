//! Credentials: reused only where they are valid, looked up once per scope, refreshed before
//! they expire, and never on an HTTP event loop.
//!
//! A backend that needs proof of identity returns a [`CredentialSource`] for an object: a
//! [`CredentialScope`] (its provider family plus the configuration origins that supplied its
//! credential options) and a [`CredentialProvider`] that can look one up. The engine keeps a
//! [`CredentialCache`] keyed by scope:
//!
//! - **single flight**: concurrent requests for the same cold scope share one lookup;
//! - **lazy, proactive refresh**: a credential becomes refreshable in the final tenth of its
//!   lifetime (that margin bounded to 1–60 s); the first request inside the window refreshes
//!   while the others wait for the same result;
//! - **no negative caching**: a failed lookup is returned to every waiter, never stored;
//! - **every flight lands**: a provider that panics (or an owner that unwinds before it could
//!   ask) lands its flight as a [`Status::Credentials`] failure, so no request waits on it
//!   forever;
//! - **bounded waits**: a request waits for a lookup at most until its read's deadline
//!   ([`Status::TimedOut`]); a lookup is never abandoned or started twice in parallel, and
//!   once it returns its result serves the scope again.
//!
//! An application [`CredentialCallback`] may replace native discovery for a family: it gets
//! the canonical path and may return an expiry and a canonical prefix where its value is
//! valid. Karu caches the value under that prefix only if the requested path is inside it;
//! without a prefix the callback is asked for every request. Cold requests of a family first
//! wait for the call in flight (once), since its prefix may cover them too: concurrent cold
//! reads under one cacheable prefix call the callback once. A family whose last answer could
//! not be cached is called at once, concurrently.
//!
//! Time is a parameter of the pure parts ([`freshness`]) and of the cache (a [`Clock`]), so
//! the tests run on a simulated clock.

pub(crate) mod workers;

use std::any::Any;
use std::collections::HashMap;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use karu_config::{Origin, Snapshot};
use parking_lot::{Condvar, Mutex};

use crate::sdk::locator::{CanonicalPath, Locator};
use crate::sdk::status::{Error, Status};

/// A credential obtained for one scope: a provider-specific secret value (its type is the
/// provider's business) and an optional expiry. Cheap to clone. Its `Debug` never shows the
/// secret.
#[derive(Clone)]
pub struct Credential {
    secret: Arc<dyn Any + Send + Sync>,
    expires: Option<SystemTime>,
}

impl Credential {
    /// Wrap a provider's secret value.
    pub fn new<T: Any + Send + Sync>(secret: T) -> Self {
        Credential {
            secret: Arc::new(secret),
            expires: None,
        }
    }

    /// Set when it stops being valid.
    pub fn with_expiry(mut self, expires: Option<SystemTime>) -> Self {
        self.expires = expires;
        self
    }

    /// The secret value, if it is of type `T`.
    pub fn get<T: Any>(&self) -> Option<&T> {
        self.secret.downcast_ref::<T>()
    }

    /// When it expires, if it does.
    pub fn expires(&self) -> Option<SystemTime> {
        self.expires
    }

    /// Whether two handles share one looked-up value.
    pub fn same(&self, other: &Credential) -> bool {
        Arc::ptr_eq(&self.secret, &other.secret)
    }
}

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credential")
            .field("expires", &self.expires)
            .finish_non_exhaustive()
    }
}

/// Where a credential may be reused: a provider family (`"aws"`, `"gcp"`) and the
/// configuration origins that supplied credential options for the path. Two paths share a
/// credential only when their scopes are equal.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CredentialScope {
    family: String,
    origins: Vec<Origin>,
    detail: String,
}

impl CredentialScope {
    /// A scope for `family` from the origins of the credential options.
    pub fn new(family: impl Into<String>, origins: Vec<Origin>) -> Self {
        CredentialScope {
            family: family.into(),
            origins,
            detail: String::new(),
        }
    }

    /// Narrow the scope by a non-secret detail the origins do not capture (for example a
    /// profile name taken from the environment).
    pub fn with_detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = detail.into();
        self
    }

    /// The provider family.
    pub fn family(&self) -> &str {
        &self.family
    }
}

/// Looks up credentials. Runs on a credential worker thread, so it may block (read files, run
/// a `credential_process`, call a metadata service).
///
/// A lookup should end by the context's [`deadline`](FetchContext::deadline): a read whose
/// deadline passes fails with [`Status::TimedOut`] whether or not its lookup goes on, and a
/// lookup that never returns holds a credential worker for good. An asynchronous SDK runs
/// through [`bridge::block_on`](crate::sdk::bridge::block_on), which bounds it so.
pub trait CredentialProvider: Send + Sync + fmt::Debug {
    /// Obtain a fresh credential.
    fn fetch(&self, ctx: &FetchContext) -> Result<Credential, Error>;
}

/// What the engine tells a [`CredentialProvider`] when it asks for a lookup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct FetchContext {
    deadline: Option<Instant>,
}

impl FetchContext {
    /// A lookup for a read that must end by `deadline` (`None`: no deadline).
    pub fn new(deadline: Option<Instant>) -> Self {
        FetchContext { deadline }
    }

    /// The deadline of the read whose request started this lookup (requests that join it
    /// wait, each until its own deadline). `None` when the caller set none.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }
}

/// How a backend authenticates one object.
#[derive(Debug, Clone)]
pub struct CredentialSource {
    /// Where the result may be reused.
    pub scope: CredentialScope,
    /// Who looks it up.
    pub provider: Arc<dyn CredentialProvider>,
}

/// What an application callback returns.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CallbackCredential {
    /// The credential (its expiry, if any, is honoured).
    pub credential: Credential,
    /// The canonical prefix under which it is valid; `None` = only for this request.
    pub prefix: Option<String>,
}

impl CallbackCredential {
    /// A credential valid for this request only.
    pub fn once(credential: Credential) -> Self {
        CallbackCredential {
            credential,
            prefix: None,
        }
    }

    /// A credential valid for every canonical path under `prefix` (whole segments).
    pub fn for_prefix(credential: Credential, prefix: impl Into<String>) -> Self {
        CallbackCredential {
            credential,
            prefix: Some(prefix.into()),
        }
    }
}

/// An application callback providing credentials for one family, e.g. from a vendor SDK or
/// a secret manager. Calls for different paths may run concurrently: it must be thread safe
/// and bound its own input and output.
pub trait CredentialCallback: Send + Sync {
    /// A credential for `path`.
    fn credential(&self, path: &CanonicalPath) -> Result<CallbackCredential, Error>;
}

impl<F> CredentialCallback for F
where
    F: Fn(&CanonicalPath) -> Result<CallbackCredential, Error> + Send + Sync,
{
    fn credential(&self, path: &CanonicalPath) -> Result<CallbackCredential, Error> {
        self(path)
    }
}

/// A source of wall-clock time; the system clock in production, a simulated one in tests.
pub(crate) trait Clock: Send + Sync + fmt::Debug {
    /// The time now.
    fn now(&self) -> SystemTime;
}

/// The system clock.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// How usable a cached credential is at some moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Freshness {
    /// Use it.
    Fresh,
    /// Still valid, but in the final tenth of its lifetime: the next request refreshes it.
    Refreshable,
    /// Expired: must be looked up again.
    Expired,
}

/// The refresh margin of a credential obtained at `obtained` that expires at `expires`: a
/// tenth of its lifetime, bounded to 1–60 s.
pub(crate) fn refresh_margin(obtained: SystemTime, expires: SystemTime) -> Duration {
    let lifetime = expires.duration_since(obtained).unwrap_or(Duration::ZERO);
    (lifetime / 10).clamp(Duration::from_secs(1), Duration::from_secs(60))
}

/// Whether a credential obtained at `obtained` and expiring at `expires` (never, if `None`) is
/// fresh at `now`.
pub(crate) fn freshness(
    obtained: SystemTime,
    expires: Option<SystemTime>,
    now: SystemTime,
) -> Freshness {
    let Some(expires) = expires else {
        return Freshness::Fresh;
    };
    if now >= expires {
        return Freshness::Expired;
    }
    let margin = refresh_margin(obtained, expires);
    match expires.checked_sub(margin) {
        Some(refresh_at) if now < refresh_at => Freshness::Fresh,
        _ => Freshness::Refreshable,
    }
}

/// Counters of the cache, for tests and the demo.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CredentialStats {
    /// Lookups made by providers (cold scopes, refreshes, invalidations).
    pub lookups: u64,
    /// Calls of application callbacks.
    pub callback_calls: u64,
    /// Requests served from the cache.
    pub hits: u64,
    /// Lookups that failed.
    pub failures: u64,
    /// Requests that joined a lookup (or a callback call) already in flight instead of
    /// starting their own: the work single flight saved.
    pub waits: u64,
}

/// The scoped, single-flight credential cache of one client. Cheap to clone: clones share
/// one cache.
///
/// Every lookup is a *flight*: the request that finds a scope cold (or refreshable) flies,
/// the others join it and take its result. A flight always lands: a provider that panics
/// lands as a [`Status::Credentials`] failure, and so does an owner that unwinds or is
/// dropped before it could ask (its guard publishes the failure). Waiting for a flight is
/// bounded by the waiting read's deadline (the engine's event loops wait without blocking a
/// thread; the cache's own tests wait on a thread).
///
/// A flight is never abandoned or duplicated: a lookup that outlives a read's deadline fails
/// that read with [`Status::TimedOut`], and later reads of the scope wait for the same lookup
/// (each until its own deadline) until it returns, after which the scope works again. A
/// provider is never called a second time in parallel with itself, so a hung lookup holds
/// one credential worker, not all of them; a provider that can hang should bound its own
/// input and output (the specification asks the same of callbacks).
#[derive(Clone)]
pub(crate) struct CredentialCache {
    inner: Arc<Inner>,
}

struct Inner {
    clock: Arc<dyn Clock>,
    state: Mutex<CacheState>,
}

#[derive(Default)]
struct CacheState {
    entries: HashMap<CredentialScope, Entry>,
    /// Callback values by family, then prefix.
    prefixed: HashMap<String, Vec<Prefixed>>,
    /// Callback calls in flight, by family.
    calls: HashMap<String, Calls>,
    stats: CredentialStats,
}

enum Entry {
    Ready {
        credential: Credential,
        obtained: SystemTime,
    },
    /// A lookup in flight; requests for the scope join it. A failed flight leaves no entry
    /// (failures are never cached): its waiters read the failure from the flight itself.
    InFlight(Arc<Flight>),
}

struct Prefixed {
    prefix: String,
    credential: Credential,
    obtained: SystemTime,
}

/// The callback calls of one family that are in flight.
#[derive(Default)]
struct Calls {
    flying: Vec<Arc<Flight>>,
    /// The family's last answer could not be cached (no prefix, or one not containing its
    /// path): cold requests then call at once instead of first waiting for a call in flight.
    uncacheable: bool,
}

/// The most entries kept per family of callback prefixes.
const PREFIXES_PER_FAMILY: usize = 1024;

/// One lookup in progress, shared by the request that started it and every request that
/// joined it. It lands exactly once.
pub(crate) struct Flight {
    result: Mutex<Option<Result<Credential, Error>>>,
    /// For threads waiting in `Flight::wait_until` (the cache's tests).
    landed: Condvar,
    /// For tasks waiting in [`Flight::landed`].
    notify: tokio::sync::Notify,
}

impl Flight {
    fn new() -> Arc<Self> {
        Arc::new(Flight {
            result: Mutex::new(None),
            landed: Condvar::new(),
            notify: tokio::sync::Notify::new(),
        })
    }

    fn publish(&self, result: Result<Credential, Error>) {
        *self.result.lock() = Some(result);
        self.landed.notify_all();
        self.notify.notify_waiters();
    }

    #[cfg(test)]
    /// The result once landed, blocking the thread until then or until `deadline`
    /// (`None` if the deadline came first).
    pub(crate) fn wait_until(
        &self,
        deadline: Option<Instant>,
    ) -> Option<Result<Credential, Error>> {
        let mut result = self.result.lock();
        loop {
            if let Some(r) = &*result {
                return Some(r.clone());
            }
            match deadline {
                None => self.landed.wait(&mut result),
                Some(deadline) => {
                    if self.landed.wait_until(&mut result, deadline).timed_out() {
                        return result.clone();
                    }
                }
            }
        }
    }

    /// The result once landed (for tasks: bound it with the read's deadline).
    pub(crate) async fn landed(&self) -> Result<Credential, Error> {
        loop {
            let notified = self.notify.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            if let Some(r) = &*self.result.lock() {
                return r.clone();
            }
            notified.await;
        }
    }
}

/// What a request for a credential must do next.
#[must_use]
pub(crate) enum Step {
    /// Use this credential.
    Ready(Credential),
    /// Wait for a flight in progress. For a native scope its result is the request's; for a
    /// callback (another path's call) the request looks again once it lands.
    Join(Arc<Flight>),
    /// Look up: run [`FlightOwner::fly`] (blocking, on a credential worker).
    Fly(FlightOwner),
}

/// What a flight is keyed by.
enum Key {
    Scope(CredentialScope),
    Callback { family: String, path: CanonicalPath },
}

/// The one request that looks up for a flight. Dropping it without flying (an unwind, a
/// worker that stopped) lands the flight as a failure, so no waiter waits for it forever.
#[must_use = "a flight lands as a failure if its owner is dropped"]
pub(crate) struct FlightOwner {
    cache: Arc<Inner>,
    key: Key,
    flight: Arc<Flight>,
    landed: bool,
}

/// How a flight looks up.
pub(crate) enum Call<'a> {
    Provider(&'a dyn CredentialProvider),
    Callback(&'a dyn CredentialCallback),
}

impl FlightOwner {
    /// The flight this owner lands.
    pub(crate) fn flight(&self) -> Arc<Flight> {
        Arc::clone(&self.flight)
    }

    /// Look up (blocking) and land the flight with the result, which is also returned. A
    /// panic of the provider or callback lands as a [`Status::Credentials`] failure. A
    /// provider is told the `deadline` of the read that started the flight.
    pub(crate) fn fly(
        mut self,
        call: Call<'_>,
        deadline: Option<Instant>,
    ) -> Result<Credential, Error> {
        let ctx = FetchContext::new(deadline);
        let answer = catch_unwind(AssertUnwindSafe(|| match (call, &self.key) {
            (Call::Provider(provider), _) => provider.fetch(&ctx).map(CallbackCredential::once),
            (Call::Callback(callback), Key::Callback { path, .. }) => callback.credential(path),
            (Call::Callback(_), Key::Scope(_)) => Err(Error::internal(
                "a callback was asked for a native credential scope",
            )),
        }))
        .unwrap_or_else(|_| {
            Err(Error::new(
                Status::Credentials,
                format!(
                    "the credential lookup for the {} family panicked",
                    self.family()
                ),
            ))
        });
        self.land(answer)
    }

    fn family(&self) -> &str {
        match &self.key {
            Key::Scope(scope) => scope.family(),
            Key::Callback { family, .. } => family,
        }
    }

    /// Land the flight as failed with `error`, without a lookup (when there is nowhere to run
    /// one).
    pub(crate) fn fail(mut self, error: Error) {
        let _ = self.land(Err(error));
    }

    fn land(&mut self, answer: Result<CallbackCredential, Error>) -> Result<Credential, Error> {
        self.landed = true;
        let inner = &self.cache;
        let mut state = inner.state.lock();
        let result = match &self.key {
            Key::Scope(scope) => {
                state.stats.lookups += 1;
                let ours = matches!(
                    state.entries.get(scope),
                    Some(Entry::InFlight(f)) if Arc::ptr_eq(f, &self.flight)
                );
                match answer {
                    Ok(answer) => {
                        if ours {
                            let obtained = inner.clock.now();
                            state.entries.insert(
                                scope.clone(),
                                Entry::Ready {
                                    credential: answer.credential.clone(),
                                    obtained,
                                },
                            );
                        }
                        Ok(answer.credential)
                    }
                    Err(error) => {
                        // Handed to this flight's waiters only: the next request looks up again.
                        state.stats.failures += 1;
                        if ours {
                            state.entries.remove(scope);
                        }
                        Err(error)
                    }
                }
            }
            Key::Callback { family, path } => {
                let obtained = inner.clock.now();
                let state = &mut *state;
                let calls = state.calls.entry(family.clone()).or_default();
                calls.flying.retain(|f| !Arc::ptr_eq(f, &self.flight));
                match answer {
                    Ok(answer) => {
                        let cacheable = answer
                            .prefix
                            .as_deref()
                            .is_some_and(|p| prefix_contains(p, path.as_str()));
                        calls.uncacheable = !cacheable;
                        match answer.prefix {
                            Some(prefix) if cacheable => {
                                let entries = state.prefixed.entry(family.clone()).or_default();
                                entries.retain(|e| e.prefix != prefix);
                                if entries.len() >= PREFIXES_PER_FAMILY {
                                    entries.remove(0);
                                }
                                entries.push(Prefixed {
                                    prefix,
                                    credential: answer.credential.clone(),
                                    obtained,
                                });
                            }
                            Some(_) => {
                                // A value that claims another scope is used once, never cached.
                                tracing::warn!(
                                    family = family.as_str(),
                                    "a credential callback returned a prefix that does not contain the requested path; not caching it"
                                );
                            }
                            None => {}
                        }
                        Ok(answer.credential)
                    }
                    Err(error) => {
                        state.stats.failures += 1;
                        Err(error)
                    }
                }
            }
        };
        drop(state);
        self.flight.publish(result.clone());
        result
    }
}

impl Drop for FlightOwner {
    fn drop(&mut self) {
        if !self.landed {
            let error = Error::new(
                Status::Credentials,
                format!(
                    "the credential lookup for the {} family ended without an answer",
                    self.family()
                ),
            );
            let _ = self.land(Err(error));
        }
    }
}

impl fmt::Debug for FlightOwner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FlightOwner")
            .field("family", &self.family())
            .finish_non_exhaustive()
    }
}

impl CredentialCache {
    /// A cache on the system clock.
    pub(crate) fn new() -> Self {
        Self::with_clock(Arc::new(SystemClock))
    }

    /// A cache on this clock.
    pub(crate) fn with_clock(clock: Arc<dyn Clock>) -> Self {
        CredentialCache {
            inner: Arc::new(Inner {
                clock,
                state: Mutex::new(CacheState::default()),
            }),
        }
    }

    /// Counters so far.
    pub(crate) fn stats(&self) -> CredentialStats {
        self.inner.state.lock().stats
    }

    #[cfg(test)]
    /// A credential for `source.scope`: from the cache when fresh, else from one shared
    /// lookup. Blocks (call it on a credential worker), without a deadline.
    pub(crate) fn get(&self, source: &CredentialSource) -> Result<Credential, Error> {
        self.get_until(source, None)
    }

    #[cfg(test)]
    /// [`get`](CredentialCache::get), waiting for another request's lookup at most until
    /// `deadline` ([`Status::TimedOut`] then; the lookup goes on, and its result serves later
    /// requests). A lookup this request makes itself runs on this thread, to its end; its
    /// provider is told the deadline ([`FetchContext::deadline`]).
    pub(crate) fn get_until(
        &self,
        source: &CredentialSource,
        deadline: Option<Instant>,
    ) -> Result<Credential, Error> {
        match self.begin_scope(&source.scope) {
            Step::Ready(credential) => Ok(credential),
            Step::Join(flight) => {
                let result = flight
                    .wait_until(deadline)
                    .unwrap_or_else(|| Err(waited_too_long(source.scope.family())))?;
                self.served_by_flight();
                Ok(result)
            }
            Step::Fly(owner) => owner.fly(Call::Provider(source.provider.as_ref()), deadline),
        }
    }

    /// Forget the scope's credential if it is still `stale` (an expired-token answer), so the
    /// next lookup of the scope asks its provider again. A newer credential that another
    /// request already obtained is kept.
    pub(crate) fn invalidate(&self, scope: &CredentialScope, stale: &Credential) {
        let mut state = self.inner.state.lock();
        if let Some(Entry::Ready { credential, .. }) = state.entries.get(scope)
            && credential.same(stale)
        {
            state.entries.remove(scope);
        }
    }

    #[cfg(test)]
    /// A credential from an application callback for `path` in `family`: a cached value whose
    /// prefix contains the path, else a call (cached under its prefix when the path is
    /// inside it). Concurrent cold requests of a family first wait for a call in flight,
    /// whose prefix may cover them too, before calling themselves. Blocks (call it on a
    /// credential worker), without a deadline.
    pub(crate) fn callback(
        &self,
        family: &str,
        callback: &dyn CredentialCallback,
        path: &CanonicalPath,
    ) -> Result<Credential, Error> {
        self.callback_until(family, callback, path, None)
    }

    #[cfg(test)]
    /// [`callback`](CredentialCache::callback), waiting for a call in flight at
    /// most until `deadline` ([`Status::TimedOut`] then).
    pub(crate) fn callback_until(
        &self,
        family: &str,
        callback: &dyn CredentialCallback,
        path: &CanonicalPath,
        deadline: Option<Instant>,
    ) -> Result<Credential, Error> {
        let mut may_join = true;
        loop {
            match self.begin_callback(family, path, may_join) {
                Step::Ready(credential) => return Ok(credential),
                Step::Join(flight) => {
                    if flight.wait_until(deadline).is_none() {
                        return Err(waited_too_long(family));
                    }
                    may_join = false;
                }
                Step::Fly(owner) => return owner.fly(Call::Callback(callback), deadline),
            }
        }
    }

    /// The next step of a request for `scope`: the cached credential when fresh, else the
    /// flight in progress, else a new flight (cold, refreshable or expired).
    pub(crate) fn begin_scope(&self, scope: &CredentialScope) -> Step {
        let mut state = self.inner.state.lock();
        let now = self.inner.clock.now();
        match state.entries.get(scope) {
            Some(Entry::Ready {
                credential,
                obtained,
            }) if freshness(*obtained, credential.expires(), now) == Freshness::Fresh => {
                let credential = credential.clone();
                state.stats.hits += 1;
                Step::Ready(credential)
            }
            Some(Entry::InFlight(flight)) => {
                let flight = Arc::clone(flight);
                state.stats.waits += 1;
                Step::Join(flight)
            }
            _ => {
                let flight = Flight::new();
                state
                    .entries
                    .insert(scope.clone(), Entry::InFlight(Arc::clone(&flight)));
                Step::Fly(FlightOwner {
                    cache: Arc::clone(&self.inner),
                    key: Key::Scope(scope.clone()),
                    flight,
                    landed: false,
                })
            }
        }
    }

    /// The next step of a request for `path` from `family`'s callback: a cached value whose
    /// prefix contains the path, else (if `may_join`, and the family's answers can be
    /// cached) the newest call in flight, else a call of its own.
    pub(crate) fn begin_callback(
        &self,
        family: &str,
        path: &CanonicalPath,
        may_join: bool,
    ) -> Step {
        let mut state = self.inner.state.lock();
        let now = self.inner.clock.now();
        let found = state.prefixed.get(family).and_then(|entries| {
            entries
                .iter()
                .filter(|e| prefix_contains(&e.prefix, path.as_str()))
                .filter(|e| freshness(e.obtained, e.credential.expires(), now) == Freshness::Fresh)
                .max_by_key(|e| e.prefix.len())
                .map(|e| e.credential.clone())
        });
        if let Some(credential) = found {
            state.stats.hits += 1;
            return Step::Ready(credential);
        }
        let calls = state.calls.entry(family.to_string()).or_default();
        if may_join
            && !calls.uncacheable
            && let Some(flight) = calls.flying.last()
        {
            let flight = Arc::clone(flight);
            state.stats.waits += 1;
            return Step::Join(flight);
        }
        let flight = Flight::new();
        calls.flying.push(Arc::clone(&flight));
        state.stats.callback_calls += 1;
        Step::Fly(FlightOwner {
            cache: Arc::clone(&self.inner),
            key: Key::Callback {
                family: family.to_string(),
                path: path.clone(),
            },
            flight,
            landed: false,
        })
    }

    /// Count a request served by another request's lookup (a hit: it made none).
    pub(crate) fn served_by_flight(&self) {
        self.inner.state.lock().stats.hits += 1;
    }
}

/// The error of a request that stopped waiting for a lookup at its deadline.
pub(crate) fn waited_too_long(family: &str) -> Error {
    Error::new(
        Status::TimedOut,
        format!(
            "the read's deadline passed while its credential was being looked up ({family}); \
             the lookup goes on and later reads use its result"
        ),
    )
}

impl Default for CredentialCache {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for CredentialCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.inner.state.lock();
        f.debug_struct("CredentialCache")
            .field("scopes", &state.entries.len())
            .field("stats", &state.stats)
            .finish_non_exhaustive()
    }
}

/// Whether `prefix` contains `path` on whole segments (`s3://b/p` contains `s3://b/p/x`
/// but not `s3://b/px`; a prefix ending in `/` contains everything below it).
pub(crate) fn prefix_contains(prefix: &str, path: &str) -> bool {
    if !path.starts_with(prefix) {
        return false;
    }
    prefix.ends_with('/')
        || path.len() == prefix.len()
        || path.as_bytes()[prefix.len()] == b'/'
        || (prefix.ends_with("://") && path.len() > prefix.len())
}

/// The credential callbacks an application registered, by family.
#[derive(Default, Clone)]
pub(crate) struct Callbacks {
    by_family: HashMap<String, Arc<dyn CredentialCallback>>,
}

impl Callbacks {
    /// Register `callback` for `family` (replacing an earlier one).
    pub(crate) fn insert(
        &mut self,
        family: impl Into<String>,
        callback: Arc<dyn CredentialCallback>,
    ) {
        self.by_family.insert(family.into(), callback);
    }

    /// The callback for `family`.
    pub(crate) fn get(&self, family: &str) -> Option<&Arc<dyn CredentialCallback>> {
        self.by_family.get(family)
    }

    /// The families with a callback, sorted.
    pub(crate) fn families(&self) -> Vec<&str> {
        let mut families: Vec<&str> = self.by_family.keys().map(String::as_str).collect();
        families.sort_unstable();
        families
    }
}

impl fmt::Debug for Callbacks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Callbacks")
            .field("families", &self.by_family.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// How the engine obtains a credential for one remote object.
#[derive(Clone)]
pub(crate) enum Authority {
    /// Native discovery through the backend's provider, cached by scope.
    Native(CredentialSource),
    /// The application's callback for the family.
    Callback {
        family: String,
        callback: Arc<dyn CredentialCallback>,
        path: CanonicalPath,
    },
}

impl Authority {
    /// The authority for `locator`, or `None` if its backend needs no credential. A backend
    /// whose `credential_source` panics fails the read with [`Status::Internal`].
    pub(crate) fn for_locator(
        locator: &Locator,
        snapshot: &Snapshot,
        callbacks: &Callbacks,
    ) -> Result<Option<Authority>, Error> {
        let backend = locator.backend();
        let source = catch_unwind(AssertUnwindSafe(|| {
            backend.credential_source(locator, snapshot)
        }))
        .unwrap_or_else(|_| {
            Err(Error::internal(format!(
                "the {} backend panicked while naming the credential of {}",
                backend.name(),
                locator.canonical()
            )))
        })?;
        let Some(source) = source else {
            return Ok(None);
        };
        if let Some(callback) = callbacks.get(source.scope.family()) {
            return Ok(Some(Authority::Callback {
                family: source.scope.family().to_string(),
                callback: Arc::clone(callback),
                path: locator.canonical().clone(),
            }));
        }
        Ok(Some(Authority::Native(source)))
    }

    /// The provider family.
    pub(crate) fn family(&self) -> &str {
        match self {
            Authority::Native(source) => source.scope.family(),
            Authority::Callback { family, .. } => family,
        }
    }

    /// The next step of a request for this authority's credential (see [`Step`]).
    pub(crate) fn begin(&self, cache: &CredentialCache, may_join: bool) -> Step {
        match self {
            Authority::Native(source) => cache.begin_scope(&source.scope),
            Authority::Callback { family, path, .. } => {
                cache.begin_callback(family, path, may_join)
            }
        }
    }

    /// Whether a request that joined a flight takes its result (a native scope's single
    /// flight), rather than looking again (another path's callback call, which may or may not
    /// have cached a value covering this path).
    pub(crate) fn shares_flights(&self) -> bool {
        matches!(self, Authority::Native(_))
    }

    /// How this authority's flights look up.
    pub(crate) fn call(&self) -> Call<'_> {
        match self {
            Authority::Native(source) => Call::Provider(source.provider.as_ref()),
            Authority::Callback { callback, .. } => Call::Callback(callback.as_ref()),
        }
    }

    /// Forget `stale` so the next request looks up again (callbacks are asked again once
    /// their prefix entry is gone).
    pub(crate) fn invalidate(&self, cache: &CredentialCache, stale: &Credential) {
        match self {
            Authority::Native(source) => cache.invalidate(&source.scope, stale),
            Authority::Callback { family, .. } => {
                let mut state = cache.inner.state.lock();
                if let Some(entries) = state.prefixed.get_mut(family) {
                    entries.retain(|e| !e.credential.same(stale));
                }
            }
        }
    }
}

/// A lookup's error as the read reports it: always [`Status::Credentials`] (the read's own
/// deadline passing while it waited stays [`Status::TimedOut`]).
pub(crate) fn as_credentials_error(error: Error) -> Error {
    match error.status() {
        Status::Credentials | Status::TimedOut | Status::Cancelled => error,
        _ => Error::new(
            Status::Credentials,
            format!("cannot obtain credentials: {}", error.message()),
        ),
    }
}

impl fmt::Debug for Authority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Authority::Native(source) => f.debug_tuple("Native").field(&source.scope).finish(),
            Authority::Callback { family, path, .. } => f
                .debug_struct("Callback")
                .field("family", family)
                .field("path", path)
                .finish(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[derive(Debug)]
    struct SimClock(Mutex<SystemTime>);
    impl SimClock {
        fn new() -> Arc<Self> {
            Arc::new(SimClock(Mutex::new(
                SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000),
            )))
        }
        fn advance(&self, d: Duration) {
            *self.0.lock() += d;
        }
    }
    impl Clock for SimClock {
        fn now(&self) -> SystemTime {
            *self.0.lock()
        }
    }

    /// A provider that counts lookups, optionally held at a gate or failing, issuing
    /// credentials that live `lifetime` from the simulated clock.
    #[derive(Debug)]
    struct Counting {
        clock: Arc<SimClock>,
        lifetime: Option<Duration>,
        calls: AtomicU64,
        fail: std::sync::atomic::AtomicBool,
        /// Lookups from this call number on wait for the gate.
        gate: Option<(u64, Arc<Gate>)>,
    }
    impl Counting {
        fn new(clock: &Arc<SimClock>, lifetime: Option<Duration>) -> Arc<Self> {
            Arc::new(Counting {
                clock: Arc::clone(clock),
                lifetime,
                calls: AtomicU64::new(0),
                fail: false.into(),
                gate: None,
            })
        }

        /// A provider whose lookups from call number `from` on wait until `gate` opens, so
        /// concurrent requests overlap.
        fn held(
            clock: &Arc<SimClock>,
            lifetime: Option<Duration>,
            from: u64,
            gate: &Arc<Gate>,
        ) -> Arc<Self> {
            Arc::new(Counting {
                gate: Some((from, Arc::clone(gate))),
                ..Arc::try_unwrap(Counting::new(clock, lifetime)).unwrap()
            })
        }
    }

    impl CredentialProvider for Counting {
        fn fetch(&self, _ctx: &FetchContext) -> Result<Credential, Error> {
            let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
            if let Some((from, gate)) = &self.gate
                && n >= *from
            {
                gate.wait();
            }
            if self.fail.load(Ordering::SeqCst) {
                return Err(Error::new(Status::Credentials, "lookup failed"));
            }
            Ok(Credential::new(n).with_expiry(self.lifetime.map(|l| self.clock.now() + l)))
        }
    }

    #[test]
    fn a_lookup_is_told_the_callers_deadline() {
        #[derive(Debug, Default)]
        struct Records(Mutex<Vec<Option<Instant>>>);
        impl CredentialProvider for Records {
            fn fetch(&self, ctx: &FetchContext) -> Result<Credential, Error> {
                self.0.lock().push(ctx.deadline());
                Err(Error::new(Status::Credentials, "never cached"))
            }
        }
        let provider = Arc::new(Records::default());
        let src = CredentialSource {
            scope: CredentialScope::new("test", Vec::new()),
            provider: Arc::clone(&provider) as Arc<dyn CredentialProvider>,
        };
        let cache = CredentialCache::new();
        let deadline = Instant::now() + Duration::from_secs(5);
        assert!(cache.get_until(&src, Some(deadline)).is_err());
        assert!(cache.get(&src).is_err());
        assert_eq!(*provider.0.lock(), vec![Some(deadline), None]);
    }

    /// `n` threads asking the cache for `src` at once, while the lookup is held at `gate`
    /// until the other `n - 1` have joined its flight; their answers.
    fn concurrently(
        cache: &Arc<CredentialCache>,
        src: &CredentialSource,
        n: usize,
        gate: &Gate,
    ) -> Vec<Result<Credential, Error>> {
        let waits_before = cache.stats().waits;
        let threads: Vec<_> = (0..n)
            .map(|_| {
                let (cache, src) = (Arc::clone(cache), src.clone());
                std::thread::spawn(move || cache.get(&src))
            })
            .collect();
        wait_for_waits(cache, waits_before + n as u64 - 1);
        gate.open();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    }

    fn source(provider: Arc<dyn CredentialProvider>, origins: Vec<Origin>) -> CredentialSource {
        CredentialSource {
            scope: CredentialScope::new("aws", origins),
            provider,
        }
    }

    fn value(c: &Credential) -> u64 {
        *c.get::<u64>().unwrap()
    }

    #[test]
    fn margin_is_a_tenth_bounded_to_one_and_sixty_seconds() {
        let t0 = SystemTime::UNIX_EPOCH;
        let s = Duration::from_secs;
        assert_eq!(refresh_margin(t0, t0 + s(100)), s(10));
        assert_eq!(refresh_margin(t0, t0 + s(3600)), s(60));
        assert_eq!(refresh_margin(t0, t0 + s(5)), s(1));
        assert_eq!(refresh_margin(t0, t0), s(1));
    }

    #[test]
    fn freshness_boundaries() {
        let t0 = SystemTime::UNIX_EPOCH;
        let s = Duration::from_secs;
        let exp = Some(t0 + s(100));
        assert_eq!(freshness(t0, exp, t0 + s(89)), Freshness::Fresh);
        assert_eq!(freshness(t0, exp, t0 + s(90)), Freshness::Refreshable);
        assert_eq!(freshness(t0, exp, t0 + s(99)), Freshness::Refreshable);
        assert_eq!(freshness(t0, exp, t0 + s(100)), Freshness::Expired);
        assert_eq!(freshness(t0, None, t0 + s(1_000_000)), Freshness::Fresh);
        // One hour: the margin is capped at 60 s.
        let hour = Some(t0 + s(3600));
        assert_eq!(freshness(t0, hour, t0 + s(3539)), Freshness::Fresh);
        assert_eq!(freshness(t0, hour, t0 + s(3540)), Freshness::Refreshable);
    }

    #[test]
    fn cached_until_the_refresh_window_then_refreshed_once() {
        let clock = SimClock::new();
        let cache = CredentialCache::with_clock(clock.clone());
        let p = Counting::new(&clock, Some(Duration::from_secs(100)));
        let src = source(p.clone(), vec![Origin::Default]);
        assert_eq!(value(&cache.get(&src).unwrap()), 1);
        clock.advance(Duration::from_secs(89));
        assert_eq!(value(&cache.get(&src).unwrap()), 1, "fresh: from the cache");
        clock.advance(Duration::from_secs(1));
        assert_eq!(
            value(&cache.get(&src).unwrap()),
            2,
            "in the window: refreshed"
        );
        assert_eq!(value(&cache.get(&src).unwrap()), 2, "and cached again");
        assert_eq!(p.calls.load(Ordering::SeqCst), 2);
        let stats = cache.stats();
        assert_eq!((stats.lookups, stats.hits), (2, 2));
    }

    #[test]
    fn concurrent_cold_requests_share_one_lookup() {
        let clock = SimClock::new();
        let cache = Arc::new(CredentialCache::with_clock(clock.clone()));
        let gate = Arc::new(Gate::default());
        let p = Counting::held(&clock, None, 1, &gate);
        let src = source(p.clone(), vec![]);
        let values: Vec<u64> = concurrently(&cache, &src, 16, &gate)
            .iter()
            .map(|r| value(r.as_ref().unwrap()))
            .collect();
        assert!(values.iter().all(|&v| v == 1), "{values:?}");
        assert_eq!(p.calls.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn refresh_window_is_single_flight_too() {
        let clock = SimClock::new();
        let cache = Arc::new(CredentialCache::with_clock(clock.clone()));
        let gate = Arc::new(Gate::default());
        // The refresh (the second lookup) is held until every request has joined it.
        let p = Counting::held(&clock, Some(Duration::from_secs(100)), 2, &gate);
        let src = source(p.clone(), vec![]);
        cache.get(&src).unwrap();
        clock.advance(Duration::from_secs(95));
        let values: Vec<u64> = concurrently(&cache, &src, 8, &gate)
            .iter()
            .map(|r| value(r.as_ref().unwrap()))
            .collect();
        assert!(values.iter().all(|&v| v == 2), "{values:?}");
        assert_eq!(p.calls.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn scopes_are_separate() {
        let clock = SimClock::new();
        let cache = CredentialCache::with_clock(clock.clone());
        let p = Counting::new(&clock, None);
        let bucket_rule = Origin::PathRule {
            prefix: "s3://a".into(),
            source: Box::new(Origin::Explicit),
        };
        let a = source(p.clone(), vec![bucket_rule]);
        let global = source(p.clone(), vec![Origin::Environment]);
        assert_eq!(value(&cache.get(&a).unwrap()), 1);
        assert_eq!(value(&cache.get(&global).unwrap()), 2);
        assert_eq!(value(&cache.get(&a).unwrap()), 1);
        let profile = CredentialSource {
            scope: global.scope.clone().with_detail("profile=other"),
            provider: p.clone(),
        };
        assert_eq!(value(&cache.get(&profile).unwrap()), 3);
    }

    #[test]
    fn failures_are_returned_never_cached() {
        let clock = SimClock::new();
        let cache = CredentialCache::with_clock(clock.clone());
        let p = Counting::new(&clock, None);
        p.fail.store(true, Ordering::SeqCst);
        let src = source(p.clone(), vec![]);
        assert_eq!(cache.get(&src).unwrap_err().status(), Status::Credentials);
        assert_eq!(cache.get(&src).unwrap_err().status(), Status::Credentials);
        p.fail.store(false, Ordering::SeqCst);
        assert_eq!(value(&cache.get(&src).unwrap()), 3);
        assert_eq!(p.calls.load(Ordering::SeqCst), 3);
        assert_eq!(cache.stats().failures, 2);
    }

    #[test]
    fn waiters_share_a_failed_lookup() {
        let clock = SimClock::new();
        let cache = Arc::new(CredentialCache::with_clock(clock.clone()));
        let gate = Arc::new(Gate::default());
        let p = Counting::held(&clock, None, 1, &gate);
        p.fail.store(true, Ordering::SeqCst);
        let src = source(p.clone(), vec![]);
        for answer in concurrently(&cache, &src, 8, &gate) {
            assert_eq!(answer.unwrap_err().status(), Status::Credentials);
        }
        assert_eq!(
            p.calls.load(Ordering::SeqCst),
            1,
            "one lookup, its failure shared"
        );
        // A later request looks up again.
        assert!(cache.get(&src).is_err());
        assert_eq!(p.calls.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn invalidation_forgets_only_the_stale_value() {
        let clock = SimClock::new();
        let cache = CredentialCache::with_clock(clock.clone());
        let p = Counting::new(&clock, None);
        let src = source(p.clone(), vec![]);
        let first = cache.get(&src).unwrap();
        cache.invalidate(&src.scope, &first);
        let second = cache.get(&src).unwrap();
        assert_eq!(value(&second), 2);
        cache.invalidate(&src.scope, &first); // stale handle: the newer value stays
        assert_eq!(value(&cache.get(&src).unwrap()), 2);
    }

    #[test]
    fn callbacks_cache_by_prefix_only_when_the_path_is_inside() {
        let clock = SimClock::new();
        let cache = CredentialCache::with_clock(clock.clone());
        let calls = Arc::new(AtomicU64::new(0));
        let c = Arc::clone(&calls);
        let callback = move |path: &CanonicalPath| {
            let n = c.fetch_add(1, Ordering::SeqCst) + 1;
            let credential = Credential::new(n);
            Ok(match path.as_str() {
                p if p.starts_with("s3://scoped/") => {
                    CallbackCredential::for_prefix(credential, "s3://scoped")
                }
                p if p.starts_with("s3://liar/") => {
                    CallbackCredential::for_prefix(credential, "s3://elsewhere")
                }
                _ => CallbackCredential::once(credential),
            })
        };
        let path = |p: &str| CanonicalPath::new(p);
        let get = |p: &str| value(&cache.callback("aws", &callback, &path(p)).unwrap());
        assert_eq!(get("s3://scoped/a"), 1);
        assert_eq!(get("s3://scoped/b/c"), 1, "inside the prefix: cached");
        assert_eq!(get("s3://scopedx/a"), 2, "whole segments only: a new call");
        assert_eq!(get("s3://liar/a"), 3);
        assert_eq!(
            get("s3://liar/a"),
            4,
            "a prefix not containing the path is never cached"
        );
        assert_eq!(get("s3://none/a"), 5);
        assert_eq!(get("s3://none/a"), 6, "without a prefix: called every time");
        assert_eq!(calls.load(Ordering::SeqCst), 6);
    }

    #[test]
    fn callback_values_expire() {
        let clock = SimClock::new();
        let cache = CredentialCache::with_clock(clock.clone());
        let calls = Arc::new(AtomicU64::new(0));
        let c = Arc::clone(&calls);
        let clock2 = clock.clone();
        let callback = move |_: &CanonicalPath| {
            let n = c.fetch_add(1, Ordering::SeqCst) + 1;
            let credential =
                Credential::new(n).with_expiry(Some(clock2.now() + Duration::from_secs(100)));
            Ok(CallbackCredential::for_prefix(credential, "s3://b"))
        };
        let p = CanonicalPath::new("s3://b/k");
        let get = || value(&cache.callback("aws", &callback, &p).unwrap());
        assert_eq!(get(), 1);
        clock.advance(Duration::from_secs(50));
        assert_eq!(get(), 1);
        clock.advance(Duration::from_secs(45));
        assert_eq!(
            get(),
            2,
            "in the refresh window the callback is asked again"
        );
    }

    #[test]
    fn prefix_containment() {
        assert!(prefix_contains("s3://b", "s3://b"));
        assert!(prefix_contains("s3://b", "s3://b/k"));
        assert!(!prefix_contains("s3://b", "s3://bb/k"));
        assert!(prefix_contains("s3://b/", "s3://b/k"));
        assert!(prefix_contains("s3://", "s3://b/k"));
        assert!(!prefix_contains("s3://b/k/", "s3://b/k"));
    }

    /// Wait until `cache` counts `n` requests that joined a flight (polling: the joining
    /// threads block right after they are counted).
    fn wait_for_waits(cache: &CredentialCache, n: u64) {
        let give_up = std::time::Instant::now() + Duration::from_secs(20);
        while cache.stats().waits < n {
            assert!(std::time::Instant::now() < give_up, "{:?}", cache.stats());
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// A gate opened once, for good.
    #[derive(Debug, Default)]
    struct Gate {
        open: Mutex<bool>,
        opened: Condvar,
    }
    impl Gate {
        fn open(&self) {
            *self.open.lock() = true;
            self.opened.notify_all();
        }
        fn wait(&self) {
            let mut open = self.open.lock();
            while !*open {
                self.opened.wait(&mut open);
            }
        }
    }

    /// A provider that blocks on `gate` on its first call, then panics or answers.
    #[derive(Debug)]
    struct Held {
        gate: Arc<Gate>,
        calls: AtomicU64,
        panic_first: bool,
    }
    impl CredentialProvider for Held {
        fn fetch(&self, _ctx: &FetchContext) -> Result<Credential, Error> {
            let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
            if n == 1 {
                self.gate.wait();
                assert!(!self.panic_first, "the provider panics");
            }
            Ok(Credential::new(n))
        }
    }

    fn held(panic_first: bool) -> (Arc<Held>, Arc<Gate>) {
        let gate = Arc::new(Gate::default());
        let provider = Arc::new(Held {
            gate: Arc::clone(&gate),
            calls: AtomicU64::new(0),
            panic_first,
        });
        (provider, gate)
    }

    #[test]
    fn a_panicking_provider_lands_its_flight_as_a_credentials_failure() {
        let cache = Arc::new(CredentialCache::new());
        let (provider, gate) = held(true);
        let src = source(provider.clone(), vec![]);
        let owner = {
            let (cache, src) = (Arc::clone(&cache), src.clone());
            std::thread::spawn(move || cache.get(&src))
        };
        // The owner is in flight once a joiner can join it.
        let joiners: Vec<_> = (0..3)
            .map(|_| {
                let (cache, src) = (Arc::clone(&cache), src.clone());
                std::thread::spawn(move || cache.get(&src))
            })
            .collect();
        wait_for_waits(&cache, 3);
        gate.open();
        let owner = owner.join().expect("the panic is caught inside the cache");
        assert_eq!(owner.unwrap_err().status(), Status::Credentials);
        for j in joiners {
            assert_eq!(j.join().unwrap().unwrap_err().status(), Status::Credentials);
        }
        assert_eq!(provider.calls.load(Ordering::SeqCst), 1);
        // Nothing stayed in flight: the next request looks up again.
        assert_eq!(value(&cache.get(&src).unwrap()), 2);
        let stats = cache.stats();
        assert_eq!((stats.lookups, stats.failures, stats.waits), (2, 1, 3));
    }

    #[test]
    fn an_owner_dropped_before_it_flies_lands_its_flight_as_a_failure() {
        let cache = CredentialCache::new();
        let scope = CredentialScope::new("aws", vec![]);
        let Step::Fly(owner) = cache.begin_scope(&scope) else {
            panic!("a cold scope flies")
        };
        let Step::Join(flight) = cache.begin_scope(&scope) else {
            panic!("a scope in flight is joined")
        };
        drop(owner); // as when a worker unwinds or stops before running the lookup
        let landed = flight.wait_until(None).expect("landed");
        assert_eq!(landed.unwrap_err().status(), Status::Credentials);
        assert!(
            matches!(cache.begin_scope(&scope), Step::Fly(_)),
            "cold again"
        );
    }

    #[test]
    fn waiting_for_a_hung_lookup_ends_at_the_deadline_and_its_result_serves_later_requests() {
        let cache = Arc::new(CredentialCache::new());
        let (provider, gate) = held(false);
        let src = source(provider.clone(), vec![]);
        let owner = {
            let (cache, src) = (Arc::clone(&cache), src.clone());
            std::thread::spawn(move || cache.get(&src))
        };
        // Make sure the owner's flight is the one in progress before timing out on it.
        let watcher = {
            let (cache, src) = (Arc::clone(&cache), src.clone());
            std::thread::spawn(move || cache.get(&src))
        };
        wait_for_waits(&cache, 1);
        let deadline = std::time::Instant::now() + Duration::from_millis(20);
        let err = cache.get_until(&src, Some(deadline)).unwrap_err();
        assert_eq!(err.status(), Status::TimedOut);
        assert!(std::time::Instant::now() >= deadline);
        assert_eq!(provider.calls.load(Ordering::SeqCst), 1, "not asked again");
        gate.open();
        assert_eq!(value(&owner.join().unwrap().unwrap()), 1);
        assert_eq!(value(&watcher.join().unwrap().unwrap()), 1);
        assert_eq!(value(&cache.get(&src).unwrap()), 1, "cached");
        assert_eq!(provider.calls.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn concurrent_cold_callback_requests_of_a_family_share_one_call() {
        let cache = Arc::new(CredentialCache::new());
        let gate = Arc::new(Gate::default());
        let calls = Arc::new(AtomicU64::new(0));
        let callback = {
            let (gate, calls) = (Arc::clone(&gate), Arc::clone(&calls));
            Arc::new(move |_: &CanonicalPath| {
                let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
                gate.wait();
                Ok(CallbackCredential::for_prefix(Credential::new(n), "s3://b"))
            })
        };
        let threads: Vec<_> = (0..8)
            .map(|i| {
                let (cache, callback) = (Arc::clone(&cache), Arc::clone(&callback));
                std::thread::spawn(move || {
                    let path = CanonicalPath::new(format!("s3://b/k{i}"));
                    cache.callback("aws", callback.as_ref(), &path)
                })
            })
            .collect();
        wait_for_waits(&cache, 7);
        gate.open();
        for t in threads {
            assert_eq!(value(&t.join().unwrap().unwrap()), 1);
        }
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        let stats = cache.stats();
        assert_eq!((stats.callback_calls, stats.hits, stats.waits), (1, 7, 7));
    }

    #[test]
    fn callback_requests_not_covered_by_the_call_they_waited_for_call_for_themselves() {
        let cache = Arc::new(CredentialCache::new());
        let gate = Arc::new(Gate::default());
        let calls = Arc::new(AtomicU64::new(0));
        let (entered, first_call_entered) = std::sync::mpsc::channel();
        let entered = parking_lot::Mutex::new(entered);
        // Each bucket's credential is only valid in that bucket.
        let callback = {
            let (gate, calls) = (Arc::clone(&gate), Arc::clone(&calls));
            Arc::new(move |path: &CanonicalPath| {
                let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
                if n == 1 {
                    let _ = entered.lock().send(());
                    gate.wait();
                }
                let bucket = path.as_str().rsplit_once('/').map_or("", |(b, _)| b);
                Ok(CallbackCredential::for_prefix(
                    Credential::new(n),
                    bucket.to_string(),
                ))
            })
        };
        let ask = |bucket: &str| {
            let (cache, callback) = (Arc::clone(&cache), Arc::clone(&callback));
            let path = CanonicalPath::new(format!("s3://{bucket}/k"));
            std::thread::spawn(move || cache.callback("aws", callback.as_ref(), &path))
        };
        let first = ask("a");
        // "a" holds the first call before "b" asks, so "b" waits for a call that cannot
        // cover it (the order is arranged, not raced).
        first_call_entered.recv().unwrap();
        let other = ask("b");
        wait_for_waits(&cache, 1);
        gate.open();
        assert_eq!(value(&first.join().unwrap().unwrap()), 1);
        assert_eq!(value(&other.join().unwrap().unwrap()), 2, "its own call");
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn debug_never_shows_the_secret() {
        let c = Credential::new(String::from("SECRET-VALUE"));
        assert!(!format!("{c:?}").contains("SECRET"));
    }
}
