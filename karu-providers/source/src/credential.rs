//! Source Cooperative credentials: none for public data; otherwise an S3 key pair from
//! Source's own profile, `credential_process` or API key (the S3 provider's
//! [`ProfileLookup`], which never reads the AWS environment's credentials), or from an
//! application's callback for the `source` family.

use std::fmt;
use std::time::SystemTime;

use karu_engine::sdk::{Credential, CredentialProvider, Error, FetchContext};
use karu_provider_s3::ProfileLookup;

/// The credential of an anonymous read: nothing to sign with.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Anonymous;

/// A [`Credential`] for signed Source reads from an API key (or temporary keys) the
/// application holds, for a [`CredentialCallback`](karu_engine::sdk::CredentialCallback)
/// registered for the [`FAMILY`](crate::FAMILY) `"source"`. It is an S3 key pair, signed with
/// the S3 provider's SigV4. Its `Debug` shows neither the secret nor the token.
///
/// ```
/// let credential = karu_provider_source::credential("AKSOURCE", "secret", None, None);
/// assert!(!format!("{credential:?}").contains("secret"));
/// ```
pub fn credential(
    access_key_id: impl Into<String>,
    secret_access_key: impl Into<String>,
    session_token: Option<String>,
    expires: Option<SystemTime>,
) -> Credential {
    karu_provider_s3::credential(access_key_id, secret_access_key, session_token, expires)
}

/// Looks up the credential of one scope: the configured sources, or anonymous.
pub(crate) struct SourceCredentials {
    lookup: Option<ProfileLookup>,
}

impl SourceCredentials {
    pub(crate) fn new(lookup: Option<ProfileLookup>) -> Self {
        SourceCredentials { lookup }
    }
}

impl fmt::Debug for SourceCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SourceCredentials")
            .field("lookup", &self.lookup)
            .finish()
    }
}

impl CredentialProvider for SourceCredentials {
    fn fetch(&self, ctx: &FetchContext) -> Result<Credential, Error> {
        match &self.lookup {
            Some(lookup) => lookup.fetch(ctx),
            None => Ok(Credential::new(Anonymous)),
        }
    }
}
