//! The driver of reusable redirect locations (the pure map is [`locations`](super::locations)):
//! a kept location replaces the prepared URL; when many transfers of one object start
//! together, the first request leads a flight to the redirecting URL and the others wait for
//! the location it finds (single flight), handing their permits back while they wait; a
//! redirected request's final location is kept for as long as the backend says it stays valid.

use std::time::{Duration, Instant, SystemTime};

use http::{HeaderMap, Uri};
use karu_config::Snapshot;
use parking_lot::Mutex;
use tokio::time::sleep_until;

use crate::batch::until_cancelled;
use crate::http::ReleasablePermits;
use crate::http::exchange::{Exchange, Failure};
use crate::http::locations::{Flight, LocationKey, Locations, Waiting};
use crate::retry::FailureClass;
use crate::sdk::{Error, HttpOptions, Locator, PreparedRequest};

/// Where an exchange keeps and finds reusable redirect locations (see
/// [`locations`](super::locations)).
#[derive(Clone, Copy)]
pub(crate) struct Reuse<'a> {
    pub(crate) locations: &'a Mutex<Locations>,
    /// Woken whenever a flight of a first request ends (see [`Locations::poll_flight`]).
    pub(crate) flights: &'a tokio::sync::Notify,
    pub(crate) locator: &'a Locator,
    pub(crate) snapshot: &'a Snapshot,
}

/// The flight a request leads (see [`Locations::poll_flight`]): when the exchange ends,
/// with or without a location kept, its followers are woken.
pub(crate) struct Leading<'a> {
    reuse: Reuse<'a>,
    key: LocationKey,
    id: u64,
}

impl Drop for Leading<'_> {
    fn drop(&mut self) {
        self.reuse
            .locations
            .lock()
            .handle_landed(&self.key, self.id);
        self.reuse.flights.notify_waiters();
    }
}

/// An exchange sent to a reused location: what it replaced, to go back to once if the
/// location no longer serves.
pub(super) struct Replaced {
    pub(super) url: Uri,
    pub(super) headers: HeaderMap,
}

/// Whether a reused location's answer says it no longer serves (expired, revoked, or the
/// object moved): the request goes back to the prepared URL.
pub(super) fn location_failed(status: u16) -> bool {
    matches!(status, 403 | 404 | 410)
}

impl Exchange<'_> {
    /// Without a kept location for `key`, join its first request's flight: lead it (the guard
    /// returned ends it when dropped) or wait for the leader's location, until the leader's
    /// deadline or this exchange's, whichever comes first. Without a location after waiting,
    /// the request goes to the prepared URL itself.
    pub(super) async fn join_flight<'r>(
        &self,
        reuse: Reuse<'r>,
        key: &LocationKey,
    ) -> Result<(Option<Uri>, Option<Leading<'r>>), Failure> {
        let flight = reuse
            .locations
            .lock()
            .poll_flight(key, Instant::now(), self.deadline);
        let (id, until) = match flight {
            Flight::Lead(id) => {
                let leading = Leading {
                    reuse,
                    key: key.clone(),
                    id,
                };
                return Ok((None, Some(leading)));
            }
            Flight::Wait { id, until } => (id, until.min(self.deadline)),
        };
        tracing::debug!("waiting for a concurrent request's redirect location");
        let location = self.wait_for_flight(reuse, key, id, until).await?;
        Ok((location, None))
    }

    /// Before a request is admitted: if no location is kept for its object and a first
    /// request of it is in flight, wait for that flight's end holding no room (its permits
    /// handed back, see [`ReleasablePermits`]), then queue for permits again. Returns how long it
    /// queued for them (the caller's deadline does not count it).
    pub(crate) async fn await_flight(
        &self,
        request: &PreparedRequest,
    ) -> Result<Duration, Failure> {
        if !request.options.resolve_once {
            return Ok(Duration::ZERO);
        }
        let (Some(reuse), Some(key)) = (
            self.reuse,
            self.location_key(&request.url, &request.headers, &request.options),
        ) else {
            return Ok(Duration::ZERO);
        };
        let now = Instant::now();
        let flight = {
            let mut locations = reuse.locations.lock();
            if locations.poll_location(&key, now).is_some() {
                return Ok(Duration::ZERO);
            }
            locations.peek_flight(&key, now)
        };
        let Some((id, until)) = flight else {
            return Ok(Duration::ZERO);
        };
        tracing::debug!("waiting, without a permit, for a concurrent request's redirect location");
        let released = self.held.is_some_and(ReleasablePermits::release);
        Box::pin(self.wait_for_flight(reuse, &key, id, until.min(self.deadline))).await?;
        let Some(held) = self.held.filter(|_| released) else {
            return Ok(Duration::ZERO);
        };
        let queued = Instant::now();
        let reacquired = tokio::select! {
            biased;
            () = until_cancelled(self.cancel) => return Err(Failure::cancelled()),
            ok = held.reacquire() => ok,
        };
        if !reacquired {
            return Err(Failure::new(
                Error::internal("the concurrency limit was closed"),
                FailureClass::Permanent,
            ));
        }
        Ok(queued.elapsed())
    }

    /// The key of `request`'s reusable location, if a location may be kept for it or a first
    /// request of it may be in flight. Most requests are never redirected: building no key
    /// for them saves its allocations on every request.
    pub(super) fn location_key_if_kept(&self, request: &PreparedRequest) -> Option<LocationKey> {
        let reuse = self.reuse?;
        if !request.options.resolve_once && reuse.locations.lock().is_empty() {
            return None;
        }
        self.location_key(&request.url, &request.headers, &request.options)
    }

    /// The key of the reusable location of a request prepared with `url` and `headers`, if it
    /// may have one.
    pub(super) fn location_key(
        &self,
        url: &Uri,
        headers: &HeaderMap,
        options: &HttpOptions,
    ) -> Option<LocationKey> {
        let reuse = self.reuse.filter(|_| options.follow_redirects)?;
        let locations = reuse.locations.lock();
        let digest = locations.credential_digest(headers, &options.sensitive_headers);
        Some(LocationKey::new(
            reuse.locator.canonical().as_str(),
            url,
            digest,
        ))
    }

    /// Wait as a follower of flight `id` of `key` until it ends or `until`: the location the
    /// leader kept, or `None` (ask the prepared URL).
    async fn wait_for_flight(
        &self,
        reuse: Reuse<'_>,
        key: &LocationKey,
        id: u64,
        until: Instant,
    ) -> Result<Option<Uri>, Failure> {
        loop {
            let ended = reuse.flights.notified();
            tokio::pin!(ended);
            ended.as_mut().enable();
            let now = Instant::now();
            let waiting = reuse.locations.lock().poll_waiting(key, id, now);
            match waiting {
                Waiting::Location(location) => return Ok(Some(location)),
                Waiting::Go => return Ok(None),
                Waiting::Wait if now >= until => return Ok(None),
                Waiting::Wait => {}
            }
            tokio::select! {
                biased;
                () = until_cancelled(self.cancel) => return Err(Failure::cancelled()),
                () = &mut ended => {}
                () = sleep_until(until.into()) => {}
            }
        }
    }

    /// Keep the final location of a redirected request for later requests of the same object,
    /// for as long as the backend says it stays valid.
    pub(super) fn keep_location(&self, reuse: Reuse<'_>, key: LocationKey, location: &Uri) {
        let lifetime = self.backend.reusable_location(
            reuse.locator,
            reuse.snapshot,
            location,
            SystemTime::now(),
        );
        if let Some(lifetime) = lifetime {
            reuse
                .locations
                .lock()
                .handle_location(key, location.clone(), lifetime, Instant::now());
        }
    }
}
