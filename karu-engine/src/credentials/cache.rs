//! The scoped, single-flight credential cache of one client: native credentials by scope,
//! callback values by family and prefix, each refreshed in its refresh window
//! ([`freshness`](crate::freshness)) on the client's [`Clock`].

use std::collections::HashMap;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
#[cfg(test)]
use std::time::Instant;
use std::time::SystemTime;

use parking_lot::Mutex;

use super::flight::Flight;
#[cfg(test)]
use super::flight::waited_too_long;
use crate::freshness::{Freshness, freshness};
#[cfg(test)]
use crate::sdk::CredentialSource;
use crate::sdk::{
    CallbackCredential, CanonicalPath, Clock, Credential, CredentialCallback, CredentialProvider,
    CredentialScope, Error, FetchContext, Status, SystemClock,
};

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
/// input and output (the contract asks the same of callbacks: `karu-engine/README.md`,
/// "Credentials and scopes").
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
    /// provider or callback is told `ctx`: the deadline of the read that started the flight
    /// (and a provider the client's token client).
    pub(crate) fn fly(mut self, call: Call<'_>, ctx: &FetchContext) -> Result<Credential, Error> {
        let answer = catch_unwind(AssertUnwindSafe(|| match (call, &self.key) {
            (Call::Provider(provider), _) => provider.fetch(ctx).map(CallbackCredential::once),
            (Call::Callback(callback), Key::Callback { path, .. }) => {
                callback.credential_within(path, ctx)
            }
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
                        let cacheable = answer.prefix.as_deref().is_some_and(|p| path.is_under(p));
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
            Step::Fly(owner) => owner.fly(
                Call::Provider(source.provider.as_ref()),
                &FetchContext::new(deadline),
            ),
        }
    }

    /// Forget `family`'s callback values that are `stale`, so the next request of a path
    /// they covered asks the callback again.
    pub(crate) fn invalidate_callback(&self, family: &str, stale: &Credential) {
        let mut state = self.inner.state.lock();
        if let Some(entries) = state.prefixed.get_mut(family) {
            entries.retain(|e| !e.credential.same(stale));
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
                Step::Fly(owner) => {
                    return owner.fly(Call::Callback(callback), &FetchContext::new(deadline));
                }
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
                .filter(|e| path.is_under(&e.prefix))
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
