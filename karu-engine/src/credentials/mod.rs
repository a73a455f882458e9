//! Credentials: reused only where they are valid, looked up once per scope, refreshed before
//! they expire, and never on an HTTP event loop.
//!
//! A backend that needs proof of identity returns a [`CredentialSource`](crate::sdk::CredentialSource) for an object: a
//! [`CredentialScope`](crate::sdk::CredentialScope) (its provider family plus the configuration origins that supplied its
//! credential options) and a [`CredentialProvider`](crate::sdk::CredentialProvider) that can look one up. The engine keeps a
//! [`CredentialCache`] keyed by scope:
//!
//! - **single flight**: concurrent requests for the same cold scope share one lookup;
//! - **lazy, proactive refresh**: a credential becomes refreshable in the final tenth of its
//!   lifetime (that margin bounded to 1–60 s); the first request inside the window refreshes
//!   while the others wait for the same result;
//! - **no negative caching**: a failed lookup is returned to every waiter, never stored;
//! - **every flight lands**: a provider that panics (or an owner that unwinds before it could
//!   ask) lands its flight as a [`Status::Credentials`](crate::sdk::Status::Credentials) failure, so no request waits on it
//!   forever;
//! - **bounded waits**: a request waits for a lookup at most until its read's deadline
//!   ([`Status::TimedOut`](crate::sdk::Status::TimedOut)); a lookup is never abandoned or started twice in parallel, and
//!   once it returns its result serves the scope again.
//!
//! An application [`CredentialCallback`](crate::sdk::CredentialCallback) may replace native discovery for a family: it gets
//! the canonical path and may return an expiry and a canonical prefix where its value is
//! valid. Karu caches the value under that prefix only if the requested path is inside it;
//! without a prefix the callback is asked for every request. Cold requests of a family first
//! wait for the call in flight (once), since its prefix may cover them too: concurrent cold
//! reads under one cacheable prefix call the callback once. A family whose last answer could
//! not be cached is called at once, concurrently.
//!
//! Time is a parameter of the pure parts ([`freshness`](crate::freshness)) and of the cache
//! (a [`Clock`](crate::sdk::Clock)), so the tests run on a simulated clock.
//!
//! The modules: [`cache`] (the cache and the owners that land its flights), [`flight`] (one
//! lookup in progress), [`authority`] (native discovery or a callback, per object) and
//! [`workers`] (the threads lookups block on).

mod authority;
mod cache;
mod flight;
#[cfg(test)]
mod tests;
pub(crate) mod workers;

pub(crate) use authority::{Authority, Callbacks, as_credentials_error};
pub use cache::CredentialStats;
pub(crate) use cache::{CredentialCache, FlightOwner, Step};
pub(crate) use flight::{Flight, waited_too_long};
