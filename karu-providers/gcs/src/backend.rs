//! The GCS backend.

use std::time::{SystemTime, UNIX_EPOCH};

use karu_engine::sdk::BearerToken;
use karu_engine::sdk::http::HeaderMap;
use karu_engine::sdk::http::header::HeaderValue;
use karu_engine::sdk::{
    Backend, Correction, CredentialSource, Error, ErrorResponse, Locator, PerScope, PrepareContext,
    PreparedRequest, Resolved, SectionKeys, Snapshot, Status, credential_scope,
};

use crate::config::{Api, Configured, Effective, GcsConfig};
use crate::credential::{GcsSecret, Lookup};
use crate::request::{self, GOOG4};
use crate::{FAMILY, SECTION};

/// The region GCS V4 HMAC signatures name.
const HMAC_REGION: &str = "auto";

/// Serves `gs://bucket/key` and GCS URLs through the XML API (or the JSON API's media
/// downloads: [`Api`](crate::Api)).
#[derive(Debug, Default)]
pub struct GcsBackend {
    /// One credential lookup per credential scope.
    lookups: PerScope<Lookup>,
}

impl GcsBackend {
    /// A GCS backend.
    pub fn new() -> Self {
        Self::default()
    }

    fn effective(&self, locator: &Locator, snapshot: &Snapshot) -> Result<Effective, Error> {
        karu_engine::sdk::resolved_section(snapshot, locator, SECTION, "GCS", Effective::resolve)
    }
}

impl Backend for GcsBackend {
    fn name(&self) -> &str {
        "gcs"
    }

    fn resolve(&self, address: &str) -> Result<Resolved, Error> {
        Ok(request::parse(address)?.resolved())
    }

    fn credential_source(
        &self,
        locator: &Locator,
        snapshot: &Snapshot,
    ) -> Result<Option<CredentialSource>, Error> {
        let options = self.effective(locator, snapshot)?;
        if options.credential == Configured::Anonymous {
            return Ok(None);
        }
        let scope = credential_scope(FAMILY, snapshot, locator, SECTION, GcsConfig::CREDENTIAL)?;
        Ok(Some(
            self.lookups
                .source(scope, || Lookup::new(options.credential.clone())),
        ))
    }

    fn prepare(&self, ctx: &PrepareContext<'_>) -> Result<PreparedRequest, Error> {
        let locator = ctx.locator;
        let options = self.effective(locator, ctx.snapshot)?;
        let bucket = locator.container().unwrap_or_default();
        let url = match options.api {
            Api::Xml => request::object_url(&options.endpoint, bucket, locator.key()),
            Api::Json => request::media_url(&options.endpoint, bucket, locator.key()),
        };
        // Stored bytes: a gzip-stored object is served as stored, ranges on its stored bytes
        // (on either API).
        let mut prepared = PreparedRequest::get(&url, ctx)?.accept_stored_gzip();
        if let Some(project) = &options.user_project {
            let value = HeaderValue::from_str(project).map_err(|_| {
                Error::new(
                    Status::InvalidArgument,
                    "gcs.user_project holds characters a header cannot carry",
                )
            })?;
            prepared.headers.insert("x-goog-user-project", value);
        }
        // Authenticated requests are rebuilt, never redirected.
        prepared.options.follow_redirects = false;
        if options.credential == Configured::Anonymous {
            return Ok(prepared);
        }
        // An application callback's bearer token, or Karu's own lookup's value.
        let bearer = ctx
            .credential
            .and_then(|c| c.get::<BearerToken>())
            .map(|token| GcsSecret::Bearer(token.secret().to_owned()));
        let secret = bearer
            .as_ref()
            .or_else(|| ctx.credential.and_then(|c| c.get::<GcsSecret>()))
            .ok_or_else(|| {
                Error::new(
                    Status::Credentials,
                    format!("no credential was obtained for {}", locator.canonical()),
                )
            })?;
        authenticate(&mut prepared, secret)?;
        Ok(prepared)
    }

    fn correction(&self, response: &ErrorResponse<'_>) -> Option<Correction> {
        request::correction(response.status)
    }

    fn transformed(&self, headers: &HeaderMap) -> bool {
        request::transformed(headers)
    }
}

/// Add the bearer token or the HMAC signature.
fn authenticate(prepared: &mut PreparedRequest, secret: &GcsSecret) -> Result<(), Error> {
    match secret {
        GcsSecret::Bearer(token) => {
            let mut value = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
                Error::new(
                    Status::Credentials,
                    "the GCS access token holds characters a header cannot carry",
                )
            })?;
            value.set_sensitive(true);
            prepared.headers.insert("authorization", value);
        }
        GcsSecret::Hmac(key) => {
            let url = &prepared.url;
            let host = url.authority().map(|a| a.as_str()).unwrap_or_default();
            let secs = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            request::sign(
                GOOG4,
                host,
                url.path(),
                url.query().unwrap_or(""),
                &mut prepared.headers,
                key,
                HMAC_REGION,
                secs,
                "UNSIGNED-PAYLOAD",
            )?;
        }
    }
    Ok(())
}
