//! [`BearerToken`]: the credential value of the families that send `Authorization: Bearer`.

use std::fmt;

/// An access token sent as `Authorization: Bearer <token>`: the credential value an
/// application's [`CredentialCallback`](crate::sdk::CredentialCallback) returns (wrapped in a
/// [`Credential`](crate::sdk::Credential), with its expiry) for the families whose providers
/// authenticate with one: `gcp` (Google Cloud Storage, an OAuth 2 access token), `azure`
/// (Azure Blob and Data Lake Storage, an Entra ID access token) and `hf` (Hugging Face, a
/// user access token). A provider of such a family accepts it besides its own credential
/// values; a provider that takes no bearer token (`aws`) fails the read with
/// [`Status::Credentials`](crate::sdk::Status::Credentials).
///
/// The token is a secret: its `Debug` shows none of it, and Karu never puts it in an error or
/// a log (the header that carries it is marked sensitive).
///
/// ```
/// use karu_engine::sdk::{BearerToken, CallbackCredential, Credential};
/// use std::time::{Duration, SystemTime};
///
/// let token = BearerToken::new("ya29.SECRET");
/// assert_eq!(format!("{token:?}"), "BearerToken(<redacted>)");
/// let expires = SystemTime::now() + Duration::from_secs(3600);
/// let answer = CallbackCredential::for_prefix(
///     Credential::new(token).with_expiry(Some(expires)),
///     "gs://bucket",
/// );
/// assert_eq!(answer.credential.get::<BearerToken>().map(BearerToken::secret), Some("ya29.SECRET"));
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct BearerToken(String);

impl BearerToken {
    /// A bearer token (without the `Bearer ` prefix).
    pub fn new(token: impl Into<String>) -> Self {
        BearerToken(token.into())
    }

    /// The token, for the provider that sends it in a request header: never for a message
    /// or a log.
    pub fn secret(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for BearerToken {
    /// Never the token.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("BearerToken(<redacted>)")
    }
}
