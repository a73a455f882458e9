//! The documented OAuth 2 exchanges behind Application Default Credentials and the metadata
//! server, written here on hyper and rustls (aws-lc-rs) rather than through `gcp_auth`, whose
//! authorized-user token endpoint and metadata host are fixed (they could not be tested on
//! loopback) and which reads the live process environment instead of the environment Karu
//! captured:
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
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{RSA_PKCS1_SHA256, RsaKeyPair};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use karu_engine::sdk::http::{Method, Request, header};
use karu_engine::sdk::{redact, system_time_after};
use rustls_pki_types::PrivatePkcs8KeyDer;
use rustls_pki_types::pem::PemObject;
use serde::Deserialize;

/// Google's token endpoint, for authorized-user files that do not name one.
pub(crate) const GOOGLE_TOKEN_URI: &str = "https://oauth2.googleapis.com/token";

/// The scope Karu asks for: reading objects.
pub(crate) const SCOPE: &str = "https://www.googleapis.com/auth/devstorage.read_only";

/// The most bytes of a token answer Karu reads.
const MAX_ANSWER: usize = 64 * 1024;

/// Why a token could not be obtained. Messages never hold a secret: answers are quoted through
/// [`redact::text`], and key material is never formatted.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TokenError {
    #[error("the credentials file {path} cannot be read: {why}")]
    File { path: String, why: String },
    #[error("the credentials file {path} is not a service-account or authorized-user file: {why}")]
    Format { path: String, why: String },
    #[error("the service account's private key is not a PKCS #8 RSA key")]
    Key,
    #[error("cannot sign the service account's assertion")]
    Sign,
    #[error("{what} at {url}: {why}")]
    Http {
        what: &'static str,
        url: String,
        why: String,
    },
    #[error("{what} at {url} answered {status}: {body}")]
    Refused {
        what: &'static str,
        url: String,
        status: u16,
        body: String,
    },
}

/// An access token and when it expires.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct AccessToken {
    pub(crate) token: String,
    pub(crate) expires: Option<SystemTime>,
}

impl fmt::Debug for AccessToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AccessToken")
            .field("token", &"<redacted>")
            .field("expires", &self.expires)
            .finish()
    }
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
    let der = PrivatePkcs8KeyDer::from_pem_slice(private_key_pem.as_bytes())
        .map_err(|_| TokenError::Key)?;
    let key = RsaKeyPair::from_pkcs8(der.secret_pkcs8_der()).map_err(|_| TokenError::Key)?;
    let mut head = serde_json::json!({"alg": "RS256", "typ": "JWT"});
    if let Some(kid) = private_key_id {
        head["kid"] = kid.into();
    }
    let claims = serde_json::json!({
        "iss": client_email,
        "scope": SCOPE,
        "aud": audience,
        "iat": now,
        "exp": now + 3600,
    });
    let signing_input = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(head.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    );
    let mut signature = vec![0u8; key.public_modulus_len()];
    key.sign(
        &RSA_PKCS1_SHA256,
        &SystemRandom::new(),
        signing_input.as_bytes(),
        &mut signature,
    )
    .map_err(|_| TokenError::Sign)?;
    Ok(format!(
        "{signing_input}.{}",
        URL_SAFE_NO_PAD.encode(signature)
    ))
}

/// The form body of a token request.
pub(crate) fn form(pairs: &[(&str, &str)]) -> String {
    let mut serializer = url::form_urlencoded::Serializer::new(String::new());
    for (name, value) in pairs {
        serializer.append_pair(name, value);
    }
    serializer.finish()
}

/// A token endpoint's or metadata server's answer.
#[derive(Deserialize)]
struct TokenAnswer {
    access_token: String,
    #[serde(default)]
    expires_in: Option<u64>,
}

/// Parse a token answer received at `received`.
pub(crate) fn parse_answer(body: &[u8], received: SystemTime) -> Option<AccessToken> {
    let answer: TokenAnswer = serde_json::from_slice(body).ok()?;
    if answer.access_token.is_empty() {
        return None;
    }
    Some(AccessToken {
        token: answer.access_token,
        expires: answer
            .expires_in
            .map(|secs| system_time_after(received, Duration::from_secs(secs))),
    })
}

/// One token exchange over HTTP(S): `POST` of a form, or the metadata server's `GET`.
pub(crate) struct Exchange {
    pub(crate) what: &'static str,
    pub(crate) url: String,
    /// `Some(form)`: a `POST`; `None`: a metadata `GET`.
    pub(crate) form: Option<String>,
}

impl Exchange {
    /// Run it (on the credential runtime) and parse the answer.
    pub(crate) async fn run(self) -> Result<AccessToken, TokenError> {
        let failed = |why: String| TokenError::Http {
            what: self.what,
            url: redact::address(&self.url),
            why,
        };
        let request = match &self.form {
            Some(form) => Request::builder()
                .method(Method::POST)
                .uri(&self.url)
                .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
                .body(Full::new(Bytes::from(form.clone()))),
            None => Request::builder()
                .method(Method::GET)
                .uri(&self.url)
                .header("metadata-flavor", "Google")
                .body(Full::new(Bytes::new())),
        }
        .map_err(|_| failed("not a valid request URL".into()))?;
        let client = client().map_err(failed)?;
        let response = client
            .request(request)
            .await
            .map_err(|e| failed(redact::error_chain(&e)))?;
        let status = response.status().as_u16();
        let body = Limited::new(response.into_body(), MAX_ANSWER)
            .collect()
            .await
            .map_err(|e| failed(redact::text(&e.to_string())))?
            .to_bytes();
        if !(200..300).contains(&status) {
            let text = String::from_utf8_lossy(&body[..body.len().min(512)]).into_owned();
            return Err(TokenError::Refused {
                what: self.what,
                url: redact::address(&self.url),
                status,
                body: redact::text(&text),
            });
        }
        parse_answer(&body, SystemTime::now())
            .ok_or_else(|| failed("the answer holds no access_token".into()))
    }
}

/// An HTTP(S) client: rustls with aws-lc-rs and the platform's roots, plain HTTP allowed (the
/// metadata server, loopback fakes).
fn client() -> Result<Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>, String> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_native_certs::load_native_certs().certs {
        let _ = roots.add(cert);
    }
    let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| e.to_string())?
    .with_root_certificates(roots)
    .with_no_client_auth();
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .build();
    Ok(Client::builder(TokioExecutor::new()).build(connector))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers() {
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(100);
        let a = parse_answer(
            br#"{"access_token":"ya29.x","expires_in":3599,"token_type":"Bearer"}"#,
            t,
        )
        .unwrap();
        assert_eq!(a.token, "ya29.x");
        assert_eq!(a.expires, Some(t + Duration::from_secs(3599)));
        assert!(!format!("{a:?}").contains("ya29"));
        assert!(parse_answer(br#"{"access_token":""}"#, t).is_none());
        assert!(parse_answer(b"<html>", t).is_none());
    }

    /// A lifetime past what the clock holds is 100 years, not a panic on the worker.
    #[test]
    fn a_lifetime_past_the_clock_is_a_hundred_years() {
        let t = SystemTime::now();
        let a = parse_answer(
            br#"{"access_token":"ya29.x","expires_in":18446744073709551615}"#,
            t,
        )
        .unwrap();
        assert_eq!(a.expires, Some(t + karu_engine::sdk::FOREVER));
    }

    #[test]
    fn forms_are_encoded() {
        assert_eq!(
            form(&[
                ("grant_type", "refresh_token"),
                ("refresh_token", "1//a+b=c")
            ]),
            "grant_type=refresh_token&refresh_token=1%2F%2Fa%2Bb%3Dc"
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
        assert!(matches!(e, TokenError::Key));
    }
}
