//! Who provides the credential of one remote object: the backend's native discovery, cached by
//! scope, or the application's callback for the family; and the callbacks an application
//! registered.

use std::collections::HashMap;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use karu_config::Snapshot;

use super::cache::{Call, CredentialCache, Step};
use crate::sdk::{
    CanonicalPath, Credential, CredentialCallback, CredentialSource, Error, Locator, Status,
};

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
            Authority::Callback { family, .. } => cache.invalidate_callback(family, stale),
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
