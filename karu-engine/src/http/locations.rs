//! Reusable redirect locations: where an object's request was last redirected, kept while its
//! signature is valid so later reads of the same object skip the redirecting hop.
//!
//! A backend opts in per redirect ([`Backend::reusable_location`](crate::provider::Backend)
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

/// The reusable locations of a client (see the [module](self) documentation).
#[derive(Debug)]
pub(crate) struct Locations {
    entries: HashMap<LocationKey, Entry>,
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

    /// Keep `location` for `key`, valid for `lifetime` from `now` (less the [`margin`]). A
    /// location too short-lived to reuse, or too long to keep, is not kept (and replaces
    /// nothing). When the map is full, expired entries go first, then the one expiring
    /// soonest.
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
}
