//! Credentials as a provider sees them: the secret value a lookup returns ([`Credential`]),
//! where it may be reused ([`CredentialScope`]), who looks it up ([`CredentialProvider`], told
//! the read's deadline in a [`FetchContext`]), and an application's own
//! [`CredentialCallback`]. The cache that keeps them (single flight, refresh window, scopes) is
//! the engine's (`credentials`), not the provider's.

use std::any::Any;
use std::fmt;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use karu_config::Origin;

use crate::sdk::locator::CanonicalPath;
use crate::sdk::status::Error;
use crate::sdk::token::TokenClient;

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
/// deadline passes fails with [`Status::TimedOut`](crate::sdk::Status::TimedOut) whether or not its lookup goes on, and a
/// lookup that never returns holds a credential worker for good. An asynchronous SDK runs
/// through [`bridge::block_on`](crate::sdk::bridge::block_on), which bounds it so.
pub trait CredentialProvider: Send + Sync + fmt::Debug {
    /// Obtain a fresh credential.
    fn fetch(&self, ctx: &FetchContext) -> Result<Credential, Error>;
}

/// What the engine tells a [`CredentialProvider`] when it asks for a lookup: the read's
/// deadline, and the client's [`TokenClient`] for token exchanges.
#[derive(Clone, Default)]
#[non_exhaustive]
pub struct FetchContext {
    deadline: Option<Instant>,
    tokens: Option<Arc<dyn TokenClient>>,
}

impl FetchContext {
    /// A lookup for a read that must end by `deadline` (`None`: no deadline), with no token
    /// client ([`with_token_client`](FetchContext::with_token_client)).
    pub fn new(deadline: Option<Instant>) -> Self {
        FetchContext {
            deadline,
            tokens: None,
        }
    }

    /// The same lookup, whose token exchanges go through `client`.
    pub fn with_token_client(mut self, client: Arc<dyn TokenClient>) -> Self {
        self.tokens = Some(client);
        self
    }

    /// The deadline of the read whose request started this lookup (requests that join it
    /// wait, each until its own deadline). `None` when the caller set none.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// The client token exchanges are sent with ([`token::fetch_token`](crate::sdk::token::fetch_token)):
    /// the engine's, built from the client's configuration (`http.ca_file`, timeouts), in a
    /// lookup the engine runs.
    pub fn token_client(&self) -> Option<Arc<dyn TokenClient>> {
        self.tokens.clone()
    }
}

impl fmt::Debug for FetchContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FetchContext")
            .field("deadline", &self.deadline)
            .field("token_client", &self.tokens.is_some())
            .finish()
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
///
/// A value returned with a prefix ([`CallbackCredential::for_prefix`]) is cached for every
/// path under it, and only when the path asked for is under it; a callback should not answer
/// for a path it has no credential for, but fail (a value returned for another scope is used
/// for that one read and not cached).
pub trait CredentialCallback: Send + Sync {
    /// A credential for `path`.
    fn credential(&self, path: &CanonicalPath) -> Result<CallbackCredential, Error>;

    /// A credential for `path`, for a lookup that should end by `ctx`'s
    /// [`deadline`](FetchContext::deadline) (the read's that asked for it): what the engine
    /// calls. A callback that waits on input and output bounds it so, as
    /// [`bridge::block_on`](crate::sdk::bridge::block_on) does with the context; the default
    /// calls [`credential`](CredentialCallback::credential).
    fn credential_within(
        &self,
        path: &CanonicalPath,
        ctx: &FetchContext,
    ) -> Result<CallbackCredential, Error> {
        let _ = ctx;
        self.credential(path)
    }
}

impl<F> CredentialCallback for F
where
    F: Fn(&CanonicalPath) -> Result<CallbackCredential, Error> + Send + Sync,
{
    fn credential(&self, path: &CanonicalPath) -> Result<CallbackCredential, Error> {
        self(path)
    }
}
