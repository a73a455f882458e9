//! Azure credentials: the secret the engine carries, the provider that looks it up for one
//! credential scope, and constructors for applications' callbacks.
//!
//! A SAS token in the address itself needs no lookup (the backend names no credential source
//! for it).

use std::fmt;
use std::time::SystemTime;

use karu_engine::sdk::{Credential, CredentialProvider, Error, FetchContext, Status};

use crate::config::Auth;
use crate::identity::TokenProvider;
use crate::shared_key::decode_key;

/// The secret the engine carries for Azure requests. Its `Debug` shows only the account.
#[derive(Clone, PartialEq, Eq)]
pub(crate) enum AzureSecret {
    /// Shared Key: the account and its decoded key.
    SharedKey { account: String, key: Vec<u8> },
    /// A SAS query string, appended to every request URL.
    Sas(String),
    /// An Entra ID access token, sent as `Authorization: Bearer …`.
    Bearer(String),
}

impl fmt::Debug for AzureSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AzureSecret::SharedKey { account, .. } => write!(f, "SharedKey({account})"),
            AzureSecret::Sas(_) => f.write_str("Sas(<redacted>)"),
            AzureSecret::Bearer(_) => f.write_str("Bearer(<redacted>)"),
        }
    }
}

/// A Shared Key [`Credential`] for an application's
/// [`CredentialCallback`](karu_engine::sdk::CredentialCallback) of the family
/// [`FAMILY`](crate::FAMILY): `account` and its base64 key. `InvalidArgument` if the key is
/// not base64. Its `Debug` shows the account only.
///
/// ```
/// let credential = karu_provider_azure::shared_key_credential(
///     "devstoreaccount1",
///     "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==",
/// )?;
/// assert!(!format!("{credential:?}").contains("Eby8"));
/// # Ok::<(), karu_engine::sdk::Error>(())
/// ```
pub fn shared_key_credential(account: impl Into<String>, key: &str) -> Result<Credential, Error> {
    let key = decode_key(key)
        .ok_or_else(|| Error::new(Status::InvalidArgument, "the account key is not base64"))?;
    Ok(Credential::new(AzureSecret::SharedKey {
        account: account.into(),
        key,
    }))
}

/// A SAS [`Credential`] (the query string of a SAS, with or without its `?`), valid until
/// `expires` if given.
pub fn sas_credential(token: impl Into<String>, expires: Option<SystemTime>) -> Credential {
    let token: String = token.into();
    Credential::new(AzureSecret::Sas(token.trim_start_matches('?').to_string()))
        .with_expiry(expires)
}

/// A bearer [`Credential`] (an Entra ID access token for `https://storage.azure.com/`), valid
/// until `expires` if given: Karu refreshes it in the final tenth of its lifetime, and a
/// `401` saying it expired asks for it once more.
pub fn bearer_credential(token: impl Into<String>, expires: Option<SystemTime>) -> Credential {
    Credential::new(AzureSecret::Bearer(token.into())).with_expiry(expires)
}

/// Looks up the credential of one scope from what its configuration chose.
#[derive(Debug)]
pub(crate) struct Configured {
    auth: Auth,
}

impl Configured {
    pub(crate) fn new(auth: Auth) -> Self {
        Configured { auth }
    }
}

impl CredentialProvider for Configured {
    fn fetch(&self, ctx: &FetchContext) -> Result<Credential, Error> {
        let secret = match &self.auth {
            Auth::SharedKey { account, key } => AzureSecret::SharedKey {
                account: account.clone(),
                key: key.clone(),
            },
            Auth::Sas(token) => AzureSecret::Sas(token.trim_start_matches('?').to_string()),
            Auth::Bearer(token) => AzureSecret::Bearer(token.clone()),
            Auth::Token(source) => return TokenProvider::new(source.clone()).fetch(ctx),
            Auth::Anonymous | Auth::Missing => {
                return Err(Error::new(
                    Status::Credentials,
                    "no Azure credential: set azure.connection_string, azure.account_key, \
                     azure.sas_token or azure.bearer_token (or AZURE_STORAGE_CONNECTION_STRING, \
                     AZURE_STORAGE_ACCOUNT_KEY, AZURE_STORAGE_SAS_TOKEN), a service principal \
                     (azure.tenant_id, azure.client_id, azure.client_secret or \
                     azure.federated_token_file), azure.use_managed_identity, or \
                     azure.anonymous for public containers",
                ));
            }
        };
        Ok(Credential::new(secret))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constructors_and_debug() {
        let c = sas_credential("?sv=1&sig=SECRET", None);
        assert_eq!(
            c.get::<AzureSecret>(),
            Some(&AzureSecret::Sas("sv=1&sig=SECRET".into()))
        );
        assert!(!format!("{c:?}").contains("SECRET"));
        let expires = SystemTime::UNIX_EPOCH;
        let b = bearer_credential("SECRET", Some(expires));
        assert_eq!(b.expires(), Some(expires));
        assert!(!format!("{b:?}").contains("SECRET"));
        let e = shared_key_credential("a", "no!").unwrap_err();
        assert_eq!(e.status(), Status::InvalidArgument);
    }

    #[test]
    fn a_missing_credential_is_a_credentials_error() {
        let ctx = FetchContext::new(None);
        let e = Configured::new(Auth::Missing).fetch(&ctx).unwrap_err();
        assert_eq!(e.status(), Status::Credentials);
        let ok = Configured::new(Auth::Bearer("t".into()))
            .fetch(&ctx)
            .unwrap();
        assert_eq!(
            ok.get::<AzureSecret>(),
            Some(&AzureSecret::Bearer("t".into()))
        );
    }
}
