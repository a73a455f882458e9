//! The `Backend` trait providers implement: how an address resolves, how each attempt's
//! request is prepared, and the hooks around an answer.

use std::fmt;
use std::time::{Duration, SystemTime};

use http::{HeaderMap, Uri};
use karu_config::Snapshot;

use crate::sdk::credential::CredentialSource;
use crate::sdk::locator::{Locator, Resolved};
use crate::sdk::request::{
    Capabilities, Correction, ErrorResponse, PrepareContext, PreparedRequest,
};
use crate::sdk::status::{Error, Status};

/// A provider: turns addresses into [`Locator`]s and, for remote objects, resolved objects and
/// ranges into requests the engine sends. A backend never does input or output for a read.
///
/// Implement it in a provider crate and declare it with [`RegistryBuilder::provider`](crate::sdk::RegistryBuilder::provider). A local
/// backend only implements [`Backend::resolve`] (returning [`Resolved::file`]); a remote one
/// also implements [`Backend::prepare`], and the hooks it needs.
pub trait Backend: Send + Sync + fmt::Debug + 'static {
    /// A short stable name (`"local"`, `"http"`, `"s3"`), used in messages and for grouping.
    fn name(&self) -> &str;

    /// Parse an address into its canonical identity. Pure: no network, no credentials, no
    /// filesystem access beyond what is needed to make a path absolute.
    fn resolve(&self, address: &str) -> Result<Resolved, Error>;

    /// Build the request of one attempt: URL, headers (start from
    /// [`PreparedRequest::get`], which sets the context's range, then authenticate) and
    /// options.
    /// Called late, for every attempt, so credentials and corrections are current.
    fn prepare(&self, ctx: &PrepareContext<'_>) -> Result<PreparedRequest, Error> {
        Err(Error::new(
            Status::Unsupported,
            format!(
                "the {} backend cannot prepare requests for {}",
                self.name(),
                ctx.locator.canonical()
            ),
        ))
    }

    /// How requests for `locator` are authenticated: `None` for anonymous access (the
    /// transfer joins the HTTP queue directly), or the scope and provider of its credential
    /// (the transfer first visits a credential worker). Must not do input or output: the
    /// lookup itself is the provider's [`fetch`](crate::sdk::credential::CredentialProvider::fetch).
    fn credential_source(
        &self,
        locator: &Locator,
        snapshot: &Snapshot,
    ) -> Result<Option<CredentialSource>, Error> {
        let _ = (locator, snapshot);
        Ok(None)
    }

    /// What the service can do.
    fn capabilities(&self) -> Capabilities {
        Capabilities::default()
    }

    /// After an error answer: whether a one-time correction applies (a wrong region, an
    /// expired credential). Decided from the status, headers and the first bytes of the body.
    fn correction(&self, response: &ErrorResponse<'_>) -> Option<Correction> {
        let _ = response;
        None
    }

    /// Whether a successful answer's headers show the service transformed the bytes (for
    /// example decompressed them), beyond the `Content-Encoding` check the engine makes.
    fn transformed(&self, headers: &HeaderMap) -> bool {
        let _ = headers;
        false
    }

    /// After a request for `locator` followed redirects to `location` and was answered
    /// there: how long, from `now`, that location may serve later requests for the same object
    /// directly (a signed URL's remaining lifetime), or `None` (the default) to ask the
    /// prepared URL every time.
    ///
    /// The engine keeps such locations per object, prepared URL and credential (never object
    /// bytes or sizes), stops reusing one a margin before it expires (a tenth of its lifetime,
    /// one to sixty seconds), and sends the request back to the prepared URL once when a reused
    /// location answers `403`, `404` or `410`. Requests to a reused location on another origin
    /// carry neither `Authorization` nor [`HttpOptions::sensitive_headers`](crate::sdk::HttpOptions).
    fn reusable_location(
        &self,
        locator: &Locator,
        snapshot: &Snapshot,
        location: &Uri,
        now: SystemTime,
    ) -> Option<Duration> {
        let _ = (locator, snapshot, location, now);
        None
    }

    /// After a request followed redirects and its final answer's head was accepted: whether
    /// what the last redirect said about the object (`redirect`, its headers: the Hugging Face
    /// Hub's `X-Linked-Size` and `X-Linked-Etag`) contradicts the final answer's object size
    /// (`total`) and strong ETag. A contradiction, returned as a message (no secret), fails the
    /// attempt with `Protocol` before any of its bytes is delivered. `None` (the default): no
    /// claim, or none contradicted.
    fn redirect_contradiction(
        &self,
        redirect: &HeaderMap,
        total: Option<u64>,
        etag: Option<&str>,
    ) -> Option<String> {
        let _ = (redirect, total, etag);
        None
    }

    /// After an error answer: a note the engine adds to the read's error message (what the
    /// user can do about it, e.g. that a token is needed). Decided from the status, headers
    /// and the first bytes of the body; must not hold a secret.
    fn error_hint(&self, response: &ErrorResponse<'_>) -> Option<String> {
        let _ = response;
        None
    }
}
