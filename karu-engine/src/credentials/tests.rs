//! The credential cache, on a simulated clock: single flight, the refresh window, scopes,
//! callbacks by prefix, failures never cached, every flight landing.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use karu_config::Origin;
use parking_lot::{Condvar, Mutex};

use super::*;
use crate::sdk::{
    CallbackCredential, CanonicalPath, Clock, Credential, CredentialProvider, CredentialScope,
    CredentialSource, Error, FetchContext, Status,
};

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
    fn gated(
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
    let p = Counting::gated(&clock, None, 1, &gate);
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
    let p = Counting::gated(&clock, Some(Duration::from_secs(100)), 2, &gate);
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
    let p = Counting::gated(&clock, None, 1, &gate);
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
    assert!(CanonicalPath::new("s3://b").is_under("s3://b"));
    assert!(CanonicalPath::new("s3://b/k").is_under("s3://b"));
    assert!(!CanonicalPath::new("s3://bb/k").is_under("s3://b"));
    assert!(CanonicalPath::new("s3://b/k").is_under("s3://b/"));
    assert!(CanonicalPath::new("s3://b/k").is_under("s3://"));
    assert!(!CanonicalPath::new("s3://b/k").is_under("s3://b/k/"));
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
struct GatedProvider {
    gate: Arc<Gate>,
    calls: AtomicU64,
    panic_first: bool,
}
impl CredentialProvider for GatedProvider {
    fn fetch(&self, _ctx: &FetchContext) -> Result<Credential, Error> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        if n == 1 {
            self.gate.wait();
            assert!(!self.panic_first, "the provider panics");
        }
        Ok(Credential::new(n))
    }
}

fn gated_provider(panic_first: bool) -> (Arc<GatedProvider>, Arc<Gate>) {
    let gate = Arc::new(Gate::default());
    let provider = Arc::new(GatedProvider {
        gate: Arc::clone(&gate),
        calls: AtomicU64::new(0),
        panic_first,
    });
    (provider, gate)
}

#[test]
fn a_panicking_provider_lands_its_flight_as_a_credentials_failure() {
    let cache = Arc::new(CredentialCache::new());
    let (provider, gate) = gated_provider(true);
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
    let (provider, gate) = gated_provider(false);
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
