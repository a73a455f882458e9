//! The documented OAuth 2 exchanges behind Application Default Credentials and the metadata
//! server, as requests of the SDK's credential-exchange kit ([`token`](karu_engine::sdk::token):
//! sent with the client's own HTTP client, so `http.ca_file` and the timeouts hold for them as
//! for reads), rather than through `gcp_auth`, whose authorized-user token endpoint and
//! metadata host are fixed (they could not be tested on loopback) and which reads the live
//! process environment instead of the environment Karu captured:
//!
//! - a service account: a JWT (RS256, signed with the file's private key) exchanged at the
//!   file's `token_uri` (grant `urn:ietf:params:oauth:grant-type:jwt-bearer`);
//! - an authorized user: the refresh token exchanged at `token_uri` (the file's, else
//!   Google's) (grant `refresh_token`);
//! - the metadata server: `GET /computeMetadata/v1/instance/service-accounts/default/token`
//!   with `Metadata-Flavor: Google`.
//!
//! Each answer is `{"access_token", "expires_in", "token_type"}`; the token's lifetime goes
//! into Karu's credential cache.

use std::fmt;

use karu_engine::sdk::token::{JwtError, Rs256Key, TokenRequest};
use serde::Deserialize;

/// Google's token endpoint, for authorized-user files that do not name one.
pub(crate) const GOOGLE_TOKEN_URI: &str = "https://oauth2.googleapis.com/token";

/// The scope Karu asks for: reading objects.
pub(crate) const SCOPE: &str = "https://www.googleapis.com/auth/devstorage.read_only";

/// Why a token request could not be made. Messages never hold a secret: key material is never
/// formatted.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TokenError {
    #[error("the credentials file {path} cannot be read: {why}")]
    File { path: String, why: String },
    #[error("the credentials file {path} is not a service-account or authorized-user file: {why}")]
    Format { path: String, why: String },
    #[error("the service account's private key cannot sign its assertion: {0}")]
    Key(#[from] JwtError),
}

/// A credentials file: what `GOOGLE_APPLICATION_CREDENTIALS` or the gcloud well-known file
/// holds.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum CredentialsFile {
    /// A service account's key.
    ServiceAccount {
        client_email: String,
        private_key: String,
        #[serde(default)]
        private_key_id: Option<String>,
        #[serde(default)]
        token_uri: Option<String>,
    },
    /// A user's refresh token (`gcloud auth application-default login`).
    AuthorizedUser {
        client_id: String,
        client_secret: String,
        refresh_token: String,
        #[serde(default)]
        token_uri: Option<String>,
    },
}

impl fmt::Debug for CredentialsFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CredentialsFile::ServiceAccount { client_email, .. } => f
                .debug_struct("ServiceAccount")
                .field("client_email", client_email)
                .finish_non_exhaustive(),
            CredentialsFile::AuthorizedUser { client_id, .. } => f
                .debug_struct("AuthorizedUser")
                .field("client_id", client_id)
                .finish_non_exhaustive(),
        }
    }
}

impl CredentialsFile {
    /// Parse the file at `path` (its contents `text`).
    pub(crate) fn parse(path: &str, text: &str) -> Result<Self, TokenError> {
        serde_json::from_str(text).map_err(|e| TokenError::Format {
            path: path.to_string(),
            // serde_json's message names the line and column, never the values.
            why: format!(
                "{} at line {} (a \"type\" of service_account or authorized_user with its fields)",
                match e.classify() {
                    serde_json::error::Category::Data => "missing or unexpected fields",
                    _ => "not JSON",
                },
                e.line()
            ),
        })
    }
}

/// The JWT a service account signs: RS256 over `header.claims`, for `scope` at `audience`,
/// valid for an hour from `now` (seconds since the Unix epoch).
pub(crate) fn assertion(
    client_email: &str,
    private_key_pem: &str,
    private_key_id: Option<&str>,
    audience: &str,
    now: u64,
) -> Result<String, TokenError> {
    let key = Rs256Key::from_pem(private_key_pem.as_bytes())?;
    let header = match private_key_id {
        Some(kid) => serde_json::json!({ "kid": kid }),
        None => serde_json::json!({}),
    };
    let claims = serde_json::json!({
        "iss": client_email,
        "scope": SCOPE,
        "aud": audience,
        "iat": now,
        "exp": now + 3600,
    });
    Ok(key.sign(header, &claims)?)
}

/// The metadata server's token request (`host` is `host[:port]`, or a URL).
pub(crate) fn metadata_request(host: &str) -> TokenRequest {
    let base = if host.contains("://") {
        host.trim_end_matches('/').to_string()
    } else {
        format!("http://{host}")
    };
    TokenRequest::get(format!(
        "{base}/computeMetadata/v1/instance/service-accounts/default/token"
    ))
    .header("metadata-flavor", "Google")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_urls() {
        let r = metadata_request("metadata.google.internal");
        assert_eq!(
            r.url(),
            "http://metadata.google.internal/computeMetadata/v1/instance/service-accounts/default/token"
        );
        assert_eq!(r.headers()["metadata-flavor"], "Google");
        assert_eq!(
            metadata_request("http://127.0.0.1:8080/").url(),
            "http://127.0.0.1:8080/computeMetadata/v1/instance/service-accounts/default/token"
        );
    }

    #[test]
    fn files_and_their_errors_show_no_secret() {
        let sa = CredentialsFile::parse(
            "/sa.json",
            r#"{"type":"service_account","client_email":"a@p.iam","private_key":"SECRETKEY"}"#,
        )
        .unwrap();
        assert!(!format!("{sa:?}").contains("SECRETKEY"));
        let bad = CredentialsFile::parse(
            "/x.json",
            r#"{"type":"external_account","refresh_token":"SECRET"}"#,
        )
        .unwrap_err();
        assert!(!bad.to_string().contains("SECRET"), "{bad}");
        assert!(matches!(bad, TokenError::Format { .. }));
        let e = assertion("a@p.iam", "not a key", None, "http://t", 0).unwrap_err();
        assert!(matches!(e, TokenError::Key(JwtError::NoKey)));
    }
}
