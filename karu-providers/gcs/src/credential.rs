//! GCS credentials, in the contract's order (`karu-engine/README.md`, "Where each provider looks"): a static token or HMAC keys (configured),
//! then Application Default Credentials (a configured file or `GOOGLE_APPLICATION_CREDENTIALS`,
//! a service account or an authorized user; else the gcloud well-known file), then the compute
//! metadata server.
//!
//! Lookups run on Karu's credential workers; the token exchanges ([`crate::token`]) are sent
//! with the SDK's [`fetch_token`], bounded by the read's deadline. A token's lifetime goes into
//! Karu's cache (refreshed in the final tenth, one lookup per cold scope); a `401` invalidates
//! it and authenticates once more.

use std::fmt;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use karu_engine::sdk::token::{AccessToken, TokenRequest, fetch_token};
use karu_engine::sdk::{
    Credential, CredentialProvider, Error, FetchContext, Status, read_credential_file,
};

use crate::config::Configured;
use crate::request::HmacKey;
use crate::token::{self, CredentialsFile, GOOGLE_TOKEN_URI, TokenError};

/// The secret the engine carries for GCS requests. Its `Debug` shows no secret.
#[derive(Clone)]
pub(crate) enum GcsSecret {
    /// `Authorization: Bearer …`.
    Bearer(String),
    /// A V4 HMAC signature of each request.
    Hmac(HmacKey),
}

impl fmt::Debug for GcsSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GcsSecret::Bearer(_) => f.write_str("Bearer(<redacted>)"),
            GcsSecret::Hmac(key) => write!(f, "Hmac({}, <redacted>)", key.access_id),
        }
    }
}

/// A [`Credential`] holding an OAuth 2 access token the application already has, for a
/// [`CredentialCallback`](karu_engine::sdk::CredentialCallback) registered for the
/// [`FAMILY`](crate::FAMILY) `"gcp"`; `expires` is when Karu stops reusing it (it refreshes in
/// the final tenth of the lifetime). Its `Debug` hides the token.
///
/// ```
/// use std::time::{Duration, SystemTime};
///
/// let expires = SystemTime::now() + Duration::from_secs(3600);
/// let credential = karu_provider_gcs::credential("ya29.secret", Some(expires));
/// assert_eq!(credential.expires(), Some(expires));
/// assert!(!format!("{credential:?}").contains("ya29"));
/// ```
pub fn credential(access_token: impl Into<String>, expires: Option<SystemTime>) -> Credential {
    Credential::new(GcsSecret::Bearer(access_token.into())).with_expiry(expires)
}

/// A [`Credential`] holding an HMAC key (access id and secret), for an application's callback
/// of the `"gcp"` family: requests are signed with it (`GOOG4-HMAC-SHA256`).
pub fn hmac_credential(access_id: impl Into<String>, secret: impl Into<String>) -> Credential {
    Credential::new(GcsSecret::Hmac(HmacKey {
        access_id: access_id.into(),
        secret: secret.into(),
    }))
}

/// Looks up the credential of one scope.
pub(crate) struct Lookup {
    configured: Configured,
}

impl Lookup {
    pub(crate) fn new(configured: Configured) -> Self {
        Lookup { configured }
    }
}

impl fmt::Debug for Lookup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lookup")
            .field("configured", &self.configured)
            .finish()
    }
}

fn token_credential(token: AccessToken) -> Credential {
    credential(token.token, token.expires)
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// What an exchange is called in errors, and its request.
type Exchange = (&'static str, TokenRequest);

/// The exchange a credentials file asks for.
fn file_exchange(path: &str, text: &str) -> Result<Exchange, TokenError> {
    Ok(match CredentialsFile::parse(path, text)? {
        CredentialsFile::ServiceAccount {
            client_email,
            private_key,
            private_key_id,
            token_uri,
        } => {
            let url = token_uri.unwrap_or_else(|| GOOGLE_TOKEN_URI.to_string());
            let jwt = token::assertion(
                &client_email,
                &private_key,
                private_key_id.as_deref(),
                &url,
                now_secs(),
            )?;
            (
                "the service-account token exchange",
                TokenRequest::post_form(
                    url,
                    &[
                        ("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"),
                        ("assertion", &jwt),
                    ],
                ),
            )
        }
        CredentialsFile::AuthorizedUser {
            client_id,
            client_secret,
            refresh_token,
            token_uri,
        } => (
            "the authorized-user token refresh",
            TokenRequest::post_form(
                token_uri.unwrap_or_else(|| GOOGLE_TOKEN_URI.to_string()),
                &[
                    ("grant_type", "refresh_token"),
                    ("client_id", &client_id),
                    ("client_secret", &client_secret),
                    ("refresh_token", &refresh_token),
                ],
            ),
        ),
    })
}

/// Run `exchange` with the client's token client.
fn run(ctx: &FetchContext, (what, request): Exchange) -> Result<Credential, Error> {
    fetch_token(ctx, what, request).map(token_credential)
}

fn credentials_error(e: TokenError) -> Error {
    Error::new(Status::Credentials, e.to_string())
}

impl CredentialProvider for Lookup {
    fn fetch(&self, ctx: &FetchContext) -> Result<Credential, Error> {
        match &self.configured {
            Configured::Token(token) => Ok(credential(token.clone(), None)),
            Configured::Hmac(key) => Ok(Credential::new(GcsSecret::Hmac(key.clone()))),
            Configured::Anonymous => Err(Error::new(
                Status::Internal,
                "no credential is looked up for anonymous GCS access",
            )),
            Configured::Nothing => Err(Error::new(
                Status::Credentials,
                "no GCS credentials: set gcs.token, gcs.hmac_access_id and gcs.hmac_secret, or \
                 gcs.credentials_file, enable gcs.discovery, or set gcs.anonymous for public \
                 buckets",
            )),
            Configured::Discover {
                file,
                well_known,
                metadata_host,
            } => {
                // A configured file must work: no fallback past it.
                if let Some(path) = file {
                    let text = read_credential_file(Path::new(path)).map_err(|e| {
                        credentials_error(TokenError::File {
                            path: path.clone(),
                            why: e.to_string(),
                        })
                    })?;
                    let exchange = file_exchange(path, &text).map_err(credentials_error)?;
                    return run(ctx, exchange);
                }
                if let Some(path) = well_known
                    && let Ok(text) = read_credential_file(Path::new(path))
                {
                    let exchange = file_exchange(path, &text).map_err(credentials_error)?;
                    return run(ctx, exchange);
                }
                let metadata = (
                    "the metadata server's token",
                    token::metadata_request(metadata_host),
                );
                run(ctx, metadata).map_err(|e| {
                    Error::new(
                        Status::Credentials,
                        format!(
                            "no GCS credentials: no credentials file, no gcloud \
                             application-default file, and {}",
                            e.message()
                        ),
                    )
                    .with_source(e)
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_hides_secrets() {
        let c = hmac_credential("GOOG1ID", "HMACSECRET");
        let d = format!("{c:?}{:?}", c.get::<GcsSecret>());
        assert!(d.contains("GOOG1ID") && !d.contains("HMACSECRET"), "{d}");
        let c = credential("ya29.TOKEN", None);
        assert!(!format!("{:?}", c.get::<GcsSecret>()).contains("TOKEN"));
    }
}
