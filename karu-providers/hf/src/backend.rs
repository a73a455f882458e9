//! The Hugging Face backend.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use karu_engine::sdk::BearerToken;
use karu_engine::sdk::http::header::AUTHORIZATION;
use karu_engine::sdk::http::{HeaderMap, HeaderValue, Uri};
use karu_engine::sdk::{
    Backend, CredentialSource, Error, ErrorResponse, Locator, PerScope, PrepareContext,
    PreparedRequest, Resolved, Scoped, SectionKeys, Snapshot, Status, credential_scope, section,
};

use crate::config::HfConfig;
use crate::credential::{HfToken, Tokens};
use crate::request;
use crate::{FAMILY, SECTION};

/// Serves `hf://` addresses and Hub file URLs.
#[derive(Debug, Default)]
pub struct HfBackend {
    /// One token lookup per credential scope.
    tokens: PerScope<Tokens>,
}

impl HfBackend {
    /// A Hugging Face backend.
    pub fn new() -> Self {
        Self::default()
    }
}

fn config(snapshot: &Snapshot, locator: &Locator) -> Result<Arc<Scoped<HfConfig>>, Error> {
    section::<HfConfig>(snapshot, locator, SECTION)
}

impl Backend for HfBackend {
    fn name(&self) -> &str {
        "hf"
    }

    fn resolve(&self, address: &str) -> Result<Resolved, Error> {
        request::parse(address)
            .map(|a| a.resolved())
            .map_err(|why| request::invalid(address, &why))
    }

    /// The token lookup of the object's scope; `None` (anonymous) with `hf.anonymous`.
    fn credential_source(
        &self,
        locator: &Locator,
        snapshot: &Snapshot,
    ) -> Result<Option<CredentialSource>, Error> {
        let config = config(snapshot, locator)?;
        if config.value.anonymous() {
            return Ok(None);
        }
        let scope = credential_scope(FAMILY, snapshot, locator, SECTION, HfConfig::CREDENTIAL)?;
        Ok(Some(self.tokens.source(scope, || {
            let env = snapshot
                .env_vars()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            Tokens::new(config.value.token.clone(), env)
        })))
    }

    /// A `GET` of the resolve URL with the token as a bearer token; the redirect to the CDN is
    /// followed without it (the engine drops `Authorization` when a redirect leaves the Hub's
    /// origin).
    fn prepare(&self, ctx: &PrepareContext<'_>) -> Result<PreparedRequest, Error> {
        let locator = ctx.locator;
        let config = ctx.section::<HfConfig>(SECTION)?;
        let endpoint = config.value.endpoint(ctx.snapshot).map_err(|why| {
            Error::new(
                Status::InvalidArgument,
                format!(
                    "Hugging Face configuration for {}: {why}",
                    locator.canonical()
                ),
            )
        })?;
        let address = request::parse(locator.canonical().as_str())
            .map_err(|why| request::invalid(locator.canonical().as_str(), &why))?;
        let mut prepared = PreparedRequest::get(&address.resolve_url(&endpoint), ctx)?;
        prepared.options.follow_redirects = true;
        // Concurrent first reads of a file wait for one resolve's location.
        prepared.options.resolve_once = config.value.reuse_locations();
        // An application callback's bearer token, or Karu's own lookup's value.
        let token = ctx.credential.and_then(|c| {
            c.get::<BearerToken>()
                .map(BearerToken::secret)
                .or_else(|| c.get::<HfToken>().and_then(|t| t.0.as_deref()))
        });
        if let Some(token) = token {
            let mut value = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
                Error::new(
                    Status::Credentials,
                    "the Hugging Face token holds characters a header cannot carry",
                )
            })?;
            value.set_sensitive(true);
            prepared.headers.insert(AUTHORIZATION, value);
        }
        Ok(prepared)
    }

    /// The CDN location of a redirect is reused until its signature expires (the expiry the
    /// signed URL states), unless `hf.reuse_locations = false`.
    fn reusable_location(
        &self,
        locator: &Locator,
        snapshot: &Snapshot,
        location: &Uri,
        now: SystemTime,
    ) -> Option<Duration> {
        let config = config(snapshot, locator).ok()?;
        if !config.value.reuse_locations() {
            return None;
        }
        request::signed_lifetime(location, now)
    }

    /// The Hub's `X-Linked-Size` and `X-Linked-Etag` against the CDN's answer.
    fn redirect_contradiction(
        &self,
        redirect: &HeaderMap,
        total: Option<u64>,
        etag: Option<&str>,
    ) -> Option<String> {
        request::linked_contradiction(redirect, total, etag)
    }

    /// What to do about a gated or private repository.
    fn error_hint(&self, response: &ErrorResponse<'_>) -> Option<String> {
        request::hint(response.status, response.headers)
    }
}
