//! Reusable redirect locations: where an object's request was last redirected, kept while its
//! signature is valid so later reads of the same object skip the redirecting hop.
//!
//! A backend opts in per redirect ([`Backend::reusable_location`](crate::sdk::Backend)
//! says how long a followed redirect's final location stays valid): the Hugging Face resolve
//! endpoint, for one, redirects every read of a file to a signed URL on a CDN that stays valid
//! for a while. [`Locations`] is the pure core: a bounded map from an object (canonical path,
//! the URL its request was prepared for, and the credential it was sent with) to the location,
//! with an expiry on the caller's monotonic clock. It holds locations only, never object bytes
//! or sizes.
//!
//! Call order: [`Locations::poll_location`] before an attempt (a hit is sent to the location
//! instead of the prepared URL); [`Locations::handle_location`] when an answer that followed a
//! reusable redirect was accepted; [`Locations::forget`] when a reused location failed (the
//! read then goes back to the redirecting URL once). Time is the `now` argument, so tests run
//! on a simulated clock.
//!
//! Single flight: when many transfers of one object start together (the first batch of reads
//! of a file), only one should ask the redirecting URL; the others wait for the location it
//! finds. Before a first request of a key the driver calls [`Locations::poll_flight`]: the
//! first caller [`Flight::Lead`]s (its flight lasts until the `until` it gives, its own
//! deadline), later callers [`Flight::Wait`] until the leader's flight ends (a location kept
//! by [`Locations::handle_location`], or [`Locations::handle_landed`] when the leader finished
//! without one: it failed, or its answer gave no reusable location) or until its `until`
//! passes, and never past their own deadline. A follower whose leader ended without a
//! location asks the redirecting URL itself ([`Locations::poll_waiting`] says when to stop
//! waiting): one failed leader never makes others fail. A request that finds a flight in
//! progress before it is admitted ([`Locations::peek_flight`]) waits for it holding no room:
//! it hands its concurrency permits back and queues for them again once the flight ended
//! (see [`ReleasablePermits`](super::ReleasablePermits)), before it takes room in its endpoint's
//! window. The followers of one file never hold the permits or the window another file's first read
//! needs.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, Hasher, RandomState};
use std::time::{Duration, Instant};

use http::header::{AUTHORIZATION, HeaderName};
use http::{HeaderMap, Uri};

/// Most locations kept per client.
pub(crate) const CAPACITY: usize = 1024;

/// Longest location kept, in bytes (signed URLs are a few hundred bytes to a couple of KiB):
/// with [`CAPACITY`], the map holds at most a few MiB.
pub(crate) const MAX_LOCATION_LEN: usize = 4096;

/// Which request a location replaces: the object, the URL (without its query) its request
/// was prepared for, so a changed endpoint never reuses another's location, and a digest of
/// the credential it carried (see [`Locations::credential_digest`]), so a location one token
/// obtained never serves a request made with another one, or with none.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct LocationKey {
    object: String,
    prepared: String,
    credential: u64,
}

impl LocationKey {
    /// The key of `object` (a canonical path) whose request was prepared for `prepared`
    /// with the credential whose digest is `credential`.
    pub(crate) fn new(object: &str, prepared: &Uri, credential: u64) -> Self {
        let scheme = prepared.scheme_str().unwrap_or("");
        let authority = prepared.authority().map_or("", |a| a.as_str());
        LocationKey {
            object: object.to_string(),
            prepared: format!("{scheme}://{authority}{}", prepared.path()),
            credential,
        }
    }
}

#[derive(Debug, Clone)]
struct Entry {
    location: Uri,
    /// Reused before this instant only.
    until: Instant,
}

/// A first request of a key in flight: who leads it, and until when followers wait for it.
#[derive(Debug, Clone, Copy)]
struct InFlight {
    id: u64,
    until: Instant,
}

/// What a transfer without a kept location does (see [`Locations::poll_flight`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flight {
    /// Ask the redirecting URL; end the flight with `handle_location` or `handle_landed`
    /// (passing this id).
    Lead(u64),
    /// Another transfer leads flight `id`: wait for it (see [`Locations::poll_waiting`]),
    /// at most until `until` (the leader's deadline).
    Wait { id: u64, until: Instant },
}

/// What a follower does after waking (see [`Locations::poll_waiting`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Waiting {
    /// The flight is still on: keep waiting.
    Wait,
    /// The leader kept this location: use it.
    Location(Uri),
    /// The flight ended without a location, or outlived its `until`: ask the redirecting URL.
    Go,
}

/// The reusable locations of a client (see the [module](self) documentation).
#[derive(Debug)]
pub(crate) struct Locations {
    entries: HashMap<LocationKey, Entry>,
    /// First requests in flight, at most one per key.
    flights: HashMap<LocationKey, InFlight>,
    next_flight: u64,
    capacity: usize,
    /// Keys of the credential digests: random per client, so a digest says nothing outside it.
    digests: RandomState,
}

impl Default for Locations {
    fn default() -> Self {
        Locations::with_capacity(CAPACITY)
    }
}

/// How long before its expiry a location stops being reused: a tenth of its lifetime, at
/// least one second and at most sixty (the margin credentials are refreshed with), so a
/// request sent just before the expiry still arrives in time.
pub(crate) fn margin(lifetime: Duration) -> Duration {
    (lifetime / 10).clamp(Duration::from_secs(1), Duration::from_secs(60))
}

impl Locations {
    /// An empty map keeping at most `capacity` locations.
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        Locations {
            entries: HashMap::new(),
            flights: HashMap::new(),
            next_flight: 0,
            capacity: capacity.max(1),
            digests: RandomState::new(),
        }
    }

    /// A digest of the credential a request carries: its `Authorization` header and the
    /// backend's other `sensitive` headers (a keyed hash: the values themselves are never kept).
    pub(crate) fn credential_digest(&self, headers: &HeaderMap, sensitive: &[HeaderName]) -> u64 {
        let mut hasher = self.digests.build_hasher();
        for name in std::iter::once(&AUTHORIZATION).chain(sensitive) {
            name.as_str().hash(&mut hasher);
            for value in headers.get_all(name) {
                value.as_bytes().hash(&mut hasher);
            }
        }
        hasher.finish()
    }

    /// Whether no location is kept and no first request is in flight: a request without
    /// `resolve_once` then has nothing to look up, and its key can wait for a redirect.
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty() && self.flights.is_empty()
    }

    /// How many locations are kept.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The location to send `key`'s request to at `now`, if one is kept and still valid
    /// (an expired one is dropped).
    pub(crate) fn poll_location(&mut self, key: &LocationKey, now: Instant) -> Option<Uri> {
        match self.entries.get(key) {
            Some(entry) if now < entry.until => Some(entry.location.clone()),
            Some(_) => {
                self.entries.remove(key);
                None
            }
            None => None,
        }
    }

    /// Before a first request of `key` without a kept location, at `now`: lead its flight
    /// (until `until`, the caller's deadline), or wait for the one in flight. A flight past
    /// its `until` is taken over. At most [`CAPACITY`] flights are tracked (beyond that,
    /// callers lead without followers: each asks for itself, as without single flight).
    pub(crate) fn poll_flight(
        &mut self,
        key: &LocationKey,
        now: Instant,
        until: Instant,
    ) -> Flight {
        if let Some(flight) = self.flights.get(key)
            && now < flight.until
        {
            return Flight::Wait {
                id: flight.id,
                until: flight.until,
            };
        }
        self.next_flight += 1;
        let id = self.next_flight;
        if self.flights.len() >= self.capacity {
            self.flights.retain(|_, f| now < f.until);
        }
        if self.flights.len() < self.capacity || self.flights.contains_key(key) {
            self.flights.insert(key.clone(), InFlight { id, until });
        }
        Flight::Lead(id)
    }

    /// The flight of `key` in progress at `now`, if any (its id and `until`), without taking
    /// part in it: a request about to start checks this first and waits for the leader's
    /// location before it takes any room (see [`ReleasablePermits`](super::ReleasablePermits)).
    pub(crate) fn peek_flight(&self, key: &LocationKey, now: Instant) -> Option<(u64, Instant)> {
        self.flights
            .get(key)
            .filter(|f| now < f.until)
            .map(|f| (f.id, f.until))
    }

    /// A follower of flight `id` of `key`, woken at `now`: keep waiting, use the location the
    /// leader kept, or go ask for itself (the flight ended without one, or outlived its
    /// `until`).
    pub(crate) fn poll_waiting(&mut self, key: &LocationKey, id: u64, now: Instant) -> Waiting {
        if let Some(location) = self.poll_location(key, now) {
            return Waiting::Location(location);
        }
        match self.flights.get(key) {
            Some(flight) if flight.id == id && now < flight.until => Waiting::Wait,
            _ => Waiting::Go,
        }
    }

    /// The leader of flight `id` of `key` finished without keeping a location (it failed, or
    /// its answer gave none): its followers go ask for themselves.
    pub(crate) fn handle_landed(&mut self, key: &LocationKey, id: u64) {
        if self.flights.get(key).is_some_and(|f| f.id == id) {
            self.flights.remove(key);
        }
    }

    /// Keep `location` for `key`, valid for `lifetime` from `now` (less the [`margin`]). A
    /// location too short-lived to reuse, or too long to keep, is not kept (and replaces
    /// nothing). When the map is full, expired entries go first, then the one expiring
    /// soonest. A kept location ends the key's flight.
    pub(crate) fn handle_location(
        &mut self,
        key: LocationKey,
        location: Uri,
        lifetime: Duration,
        now: Instant,
    ) {
        let margin = margin(lifetime);
        if lifetime <= margin || location.to_string().len() > MAX_LOCATION_LEN {
            return;
        }
        let Some(until) = now.checked_add(lifetime - margin) else {
            return;
        };
        if !self.entries.contains_key(&key) && self.entries.len() >= self.capacity {
            self.entries.retain(|_, e| now < e.until);
            if self.entries.len() >= self.capacity
                && let Some(soonest) = self
                    .entries
                    .iter()
                    .min_by_key(|(_, e)| e.until)
                    .map(|(k, _)| k.clone())
            {
                self.entries.remove(&soonest);
            }
        }
        self.flights.remove(&key);
        self.entries.insert(key, Entry { location, until });
    }

    /// Drop `key`'s location (it failed: the next request goes to the prepared URL).
    pub(crate) fn forget(&mut self, key: &LocationKey) {
        self.entries.remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn key(object: &str) -> LocationKey {
        LocationKey::new(
            object,
            &"https://hub.example/m/resolve/main/a".parse().unwrap(),
            0,
        )
    }

    fn cdn(n: u32) -> Uri {
        format!("https://cdn.example/blob/{n}?Expires=1&Signature=s")
            .parse()
            .unwrap()
    }

    const HOUR: Duration = Duration::from_secs(3600);

    #[test]
    fn a_location_is_reused_until_its_margin_before_expiry() {
        let t0 = Instant::now();
        let mut map = Locations::default();
        let k = key("hf://m@main/a");
        assert_eq!(map.poll_location(&k, t0), None);
        map.handle_location(k.clone(), cdn(1), HOUR, t0);
        // Sixty seconds of margin for an hour's lifetime.
        let last = t0 + HOUR - Duration::from_secs(60);
        assert_eq!(map.poll_location(&k, t0), Some(cdn(1)));
        assert_eq!(
            map.poll_location(&k, last - Duration::from_nanos(1)),
            Some(cdn(1))
        );
        assert_eq!(map.poll_location(&k, last), None, "expired at the margin");
        assert_eq!(map.len(), 0, "an expired location is dropped");
    }

    #[test]
    fn margins_are_a_tenth_within_one_to_sixty_seconds() {
        assert_eq!(margin(Duration::from_secs(5)), Duration::from_secs(1));
        assert_eq!(margin(Duration::from_secs(10)), Duration::from_secs(1));
        assert_eq!(margin(Duration::from_secs(100)), Duration::from_secs(10));
        assert_eq!(margin(Duration::from_secs(600)), Duration::from_secs(60));
        assert_eq!(margin(HOUR * 24), Duration::from_secs(60));
    }

    #[test]
    fn a_location_too_short_lived_is_not_kept_and_replaces_nothing() {
        let t0 = Instant::now();
        let mut map = Locations::default();
        let k = key("o");
        map.handle_location(k.clone(), cdn(1), Duration::from_secs(1), t0);
        assert_eq!(
            map.poll_location(&k, t0),
            None,
            "1 s lives no longer than its margin"
        );
        map.handle_location(k.clone(), cdn(2), Duration::from_secs(2), t0);
        assert_eq!(
            map.poll_location(&k, t0),
            Some(cdn(2)),
            "2 s: reused for 1 s"
        );
        map.handle_location(k.clone(), cdn(3), Duration::ZERO, t0);
        assert_eq!(map.poll_location(&k, t0), Some(cdn(2)));
        assert_eq!(
            map.poll_location(&k, t0 + Duration::from_secs(1)),
            None,
            "reused for its lifetime less the margin only"
        );
    }

    #[test]
    fn forget_sends_the_next_request_back() {
        let t0 = Instant::now();
        let mut map = Locations::default();
        let (a, b) = (key("a"), key("b"));
        map.handle_location(a.clone(), cdn(1), HOUR, t0);
        map.handle_location(b.clone(), cdn(2), HOUR, t0);
        map.forget(&a);
        assert_eq!(map.poll_location(&a, t0), None);
        assert_eq!(map.poll_location(&b, t0), Some(cdn(2)));
        // A newer location replaces an older one.
        map.handle_location(b.clone(), cdn(3), HOUR, t0);
        assert_eq!(map.poll_location(&b, t0), Some(cdn(3)));
    }

    #[test]
    fn keys_tell_objects_and_prepared_urls_apart() {
        let u: Uri = "https://hub.example/m/resolve/main/a?x=1".parse().unwrap();
        let v: Uri = "https://mirror.example/m/resolve/main/a".parse().unwrap();
        let plain: Uri = "https://hub.example/m/resolve/main/a".parse().unwrap();
        assert_eq!(
            LocationKey::new("o", &u, 1),
            LocationKey::new("o", &plain, 1),
            "the query is not part of the key"
        );
        assert_ne!(LocationKey::new("o", &u, 1), LocationKey::new("o", &v, 1));
        assert_ne!(LocationKey::new("o", &u, 1), LocationKey::new("p", &u, 1));
        assert_ne!(LocationKey::new("o", &u, 1), LocationKey::new("o", &u, 2));
    }

    #[test]
    fn credential_digests_tell_tokens_apart_and_show_none() {
        let map = Locations::default();
        let with = |token: Option<&str>, extra: Option<&str>| {
            let mut headers = HeaderMap::new();
            headers.insert(http::header::RANGE, "bytes=0-1".parse().unwrap());
            if let Some(t) = token {
                headers.insert(AUTHORIZATION, format!("Bearer {t}").parse().unwrap());
            }
            if let Some(k) = extra {
                headers.insert("x-api-key", k.parse().unwrap());
            }
            headers
        };
        let key = [HeaderName::from_static("x-api-key")];
        let a = map.credential_digest(&with(Some("a"), None), &key);
        assert_eq!(a, map.credential_digest(&with(Some("a"), None), &key));
        assert_ne!(a, map.credential_digest(&with(Some("b"), None), &key));
        assert_ne!(a, map.credential_digest(&with(None, None), &key));
        assert_ne!(a, map.credential_digest(&with(Some("a"), Some("k")), &key));
        // Headers that are not credentials do not matter.
        let mut other = with(Some("a"), None);
        other.insert(http::header::RANGE, "bytes=5-9".parse().unwrap());
        assert_eq!(a, map.credential_digest(&other, &key));
        // Another client's digests are keyed differently.
        let elsewhere = Locations::default();
        assert_ne!(a, elsewhere.credential_digest(&with(Some("a"), None), &key));
    }

    #[test]
    fn overlong_locations_are_not_kept() {
        let t0 = Instant::now();
        let mut map = Locations::default();
        let long: Uri = format!("https://cdn.example/{}", "x".repeat(MAX_LOCATION_LEN))
            .parse()
            .unwrap();
        map.handle_location(key("o"), long, HOUR, t0);
        assert_eq!(map.len(), 0);
    }

    #[test]
    fn a_full_map_drops_expired_entries_then_the_soonest_to_expire() {
        let t0 = Instant::now();
        let mut map = Locations::with_capacity(3);
        map.handle_location(key("short"), cdn(1), Duration::from_secs(20), t0);
        map.handle_location(key("long"), cdn(2), HOUR, t0);
        map.handle_location(key("mid"), cdn(3), Duration::from_secs(600), t0);
        // Full: a fourth pushes out the one expiring soonest.
        map.handle_location(key("new"), cdn(4), HOUR, t0);
        assert_eq!(map.len(), 3);
        assert_eq!(map.poll_location(&key("short"), t0), None);
        for k in ["long", "mid", "new"] {
            assert!(map.poll_location(&key(k), t0).is_some(), "{k}");
        }
        // Later, expired entries go first (here both "mid" and nothing else).
        let later = t0 + Duration::from_secs(600);
        map.handle_location(key("newer"), cdn(5), HOUR, later);
        assert_eq!(map.poll_location(&key("mid"), later), None);
        assert!(map.poll_location(&key("long"), later).is_some());
        assert!(map.poll_location(&key("newer"), later).is_some());
        // Replacing a kept key never evicts another.
        map.handle_location(key("long"), cdn(6), HOUR, later);
        assert_eq!(map.len(), 3);
    }

    fn later(t: Instant, secs: u64) -> Instant {
        t + Duration::from_secs(secs)
    }

    #[test]
    fn the_first_request_leads_and_the_others_wait_for_its_location() {
        let t0 = Instant::now();
        let mut map = Locations::default();
        let k = key("o");
        let Flight::Lead(id) = map.poll_flight(&k, t0, later(t0, 30)) else {
            panic!("the first leads");
        };
        for _ in 0..3 {
            assert_eq!(
                map.poll_flight(&k, t0, later(t0, 99)),
                Flight::Wait {
                    id,
                    until: later(t0, 30)
                },
                "the others wait until the leader's deadline, not their own"
            );
        }
        assert_eq!(map.poll_waiting(&k, id, later(t0, 1)), Waiting::Wait);
        // Another object is not held up.
        assert!(matches!(
            map.poll_flight(&key("p"), t0, later(t0, 30)),
            Flight::Lead(_)
        ));
        map.handle_location(k.clone(), cdn(1), HOUR, later(t0, 2));
        assert_eq!(
            map.poll_waiting(&k, id, later(t0, 2)),
            Waiting::Location(cdn(1))
        );
        // The leader's own end changes nothing after that.
        map.handle_landed(&k, id);
        assert_eq!(map.poll_location(&k, later(t0, 3)), Some(cdn(1)));
    }

    #[test]
    fn a_failed_leader_lets_its_followers_ask_for_themselves() {
        let t0 = Instant::now();
        let mut map = Locations::default();
        let k = key("o");
        let Flight::Lead(id) = map.poll_flight(&k, t0, later(t0, 30)) else {
            panic!("the first leads");
        };
        map.handle_landed(&k, id);
        assert_eq!(map.poll_waiting(&k, id, t0), Waiting::Go);
        // A later first request leads a new flight.
        let Flight::Lead(next) = map.poll_flight(&k, t0, later(t0, 30)) else {
            panic!("no flight is on");
        };
        assert_ne!(next, id);
        // A location too short-lived to keep does not end the flight; the leader's end does.
        map.handle_location(k.clone(), cdn(1), Duration::from_secs(1), t0);
        assert_eq!(map.poll_waiting(&k, next, t0), Waiting::Wait);
        map.handle_landed(&k, next);
        assert_eq!(map.poll_waiting(&k, next, t0), Waiting::Go);
    }

    #[test]
    fn a_flight_past_its_deadline_is_no_longer_waited_for_and_is_taken_over() {
        let t0 = Instant::now();
        let mut map = Locations::default();
        let k = key("o");
        let Flight::Lead(old) = map.poll_flight(&k, t0, later(t0, 10)) else {
            panic!("the first leads");
        };
        assert_eq!(
            map.poll_waiting(&k, old, later(t0, 10) - Duration::from_nanos(1)),
            Waiting::Wait
        );
        assert_eq!(map.poll_waiting(&k, old, later(t0, 10)), Waiting::Go);
        let Flight::Lead(new) = map.poll_flight(&k, later(t0, 10), later(t0, 40)) else {
            panic!("an outlived flight is taken over");
        };
        // The old leader ending late does not end the new flight.
        map.handle_landed(&k, old);
        assert_eq!(map.poll_waiting(&k, new, later(t0, 11)), Waiting::Wait);
        assert!(matches!(
            map.poll_flight(&k, later(t0, 11), later(t0, 50)),
            Flight::Wait { id, .. } if id == new
        ));
    }

    #[test]
    fn flights_are_bounded_by_the_capacity() {
        let t0 = Instant::now();
        let mut map = Locations::with_capacity(2);
        for o in ["a", "b", "c", "d"] {
            assert!(matches!(
                map.poll_flight(&key(o), t0, later(t0, 5)),
                Flight::Lead(_)
            ));
        }
        assert_eq!(map.flights.len(), 2);
        // Untracked keys lead every time (no follower waits on them).
        assert!(matches!(
            map.poll_flight(&key("d"), t0, later(t0, 5)),
            Flight::Lead(_)
        ));
        // Once tracked flights outlive their deadline, they make room.
        assert!(matches!(
            map.poll_flight(&key("e"), later(t0, 5), later(t0, 9)),
            Flight::Lead(_)
        ));
        assert!(matches!(
            map.poll_flight(&key("e"), later(t0, 6), later(t0, 9)),
            Flight::Wait { .. }
        ));
    }

    proptest! {
        /// Whatever the sequence of events on a simulated clock: the map never holds more
        /// than its capacity, never hands out a location past its reuse time, and hands out
        /// only the newest location kept for a key.
        #[test]
        fn bounded_and_never_stale(
            events in proptest::collection::vec((0u8..3, 0u8..6, 0u64..200, 0u64..400), 1..200)
        ) {
            let t0 = Instant::now();
            let mut map = Locations::with_capacity(4);
            let mut now = t0;
            let mut newest: HashMap<u8, (u32, Instant)> = HashMap::new();
            for (i, (op, object, advance, lifetime)) in events.into_iter().enumerate() {
                now += Duration::from_secs(advance % 50);
                let k = key(&format!("o{object}"));
                match op {
                    0 => {
                        let lifetime = Duration::from_secs(lifetime);
                        map.handle_location(k, cdn(i as u32), lifetime, now);
                        if lifetime > margin(lifetime) {
                            newest.insert(object, (i as u32, now + lifetime - margin(lifetime)));
                        }
                    }
                    1 => {
                        map.forget(&k);
                        newest.remove(&object);
                    }
                    _ => {
                        if let Some(location) = map.poll_location(&k, now) {
                            let (n, until) = newest[&object];
                            prop_assert_eq!(location, cdn(n));
                            prop_assert!(now < until);
                        }
                    }
                }
                prop_assert!(map.len() <= 4);
            }
        }
    }

    proptest! {
        /// Whatever the sequence of first requests, ends and locations on a simulated clock:
        /// a follower is told to wait only for a live flight (one not ended, before its
        /// deadline), never two live flights of one key lead at once, and a follower's wait
        /// ends as soon as its flight does.
        #[test]
        fn single_flight_never_holds_a_follower_past_its_flight(
            events in proptest::collection::vec((0u8..4, 0u8..3, 0u64..20, 1u64..60), 1..200)
        ) {
            let t0 = Instant::now();
            let mut map = Locations::with_capacity(8);
            let mut now = t0;
            // The model: per key, the live flight (id, until) if any.
            let mut live: HashMap<u8, (u64, Instant)> = HashMap::new();
            let mut leaders: Vec<(u8, u64)> = Vec::new();
            let mut kept = std::collections::HashSet::new();
            for (op, object, advance, lifetime) in events {
                now += Duration::from_secs(advance % 7);
                live.retain(|_, (_, until)| now < *until);
                let k = key(&format!("o{object}"));
                match op {
                    0 => match map.poll_flight(&k, now, now + Duration::from_secs(lifetime)) {
                        Flight::Lead(id) => {
                            prop_assert!(!live.contains_key(&object), "two live leaders");
                            live.insert(object, (id, now + Duration::from_secs(lifetime)));
                            leaders.push((object, id));
                        }
                        Flight::Wait { id, until } => {
                            prop_assert_eq!(live.get(&object), Some(&(id, until)));
                            prop_assert!(now < until);
                        }
                    },
                    1 => {
                        if let Some(&(o, id)) = leaders.get(lifetime as usize % leaders.len().max(1)) {
                            map.handle_landed(&key(&format!("o{o}")), id);
                            if live.get(&o).is_some_and(|(l, _)| *l == id) {
                                live.remove(&o);
                            }
                        }
                    }
                    2 => {
                        // Kept for the whole run (the clock advances at most 1,200 s).
                        map.handle_location(k, cdn(1), HOUR, now);
                        live.remove(&object);
                        kept.insert(object);
                    }
                    _ => {
                        for &(o, id) in leaders.iter().filter(|(o, _)| *o == object) {
                            let waiting = map.poll_waiting(&key(&format!("o{o}")), id, now);
                            let expected = if kept.contains(&o) {
                                Waiting::Location(cdn(1))
                            } else if live.get(&o).is_some_and(|(l, _)| *l == id) {
                                Waiting::Wait
                            } else {
                                Waiting::Go
                            };
                            prop_assert_eq!(waiting, expected);
                        }
                    }
                }
            }
        }
    }
}
