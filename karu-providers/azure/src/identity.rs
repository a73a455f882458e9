//! Sends the token requests of [`token`](crate::token) with the SDK's
//! [`fetch_token`] (the client's own HTTP client, bounded by the read's deadline), and hands
//! the engine a bearer credential carrying its expiry.

use std::path::Path;
use std::time::SystemTime;

use karu_engine::sdk::token::{fetch_token, lookup_failed};
use karu_engine::sdk::{
    CREDENTIAL_FILE_MAX, Credential, CredentialProvider, Error, FetchContext, read_credential_file,
    read_regular_file,
};

use crate::assertion;
use crate::credential::AzureSecret;
use crate::token::TokenSource;

/// What can go wrong before a token request is sent; never holds a token or a key.
#[derive(Debug, thiserror::Error)]
enum AssertionError {
    #[error("cannot read the federated token file {path}: {why}")]
    TokenFile { path: String, why: String },
    #[error("cannot sign a client assertion with the certificate {path}: {why}")]
    Certificate { path: String, why: String },
}

/// Looks up tokens from one source for one credential scope.
#[derive(Debug)]
pub(crate) struct TokenProvider {
    source: TokenSource,
}

impl TokenProvider {
    pub(crate) fn new(source: TokenSource) -> Self {
        TokenProvider { source }
    }

    /// The client assertion the source sends, if it sends one.
    fn assertion(&self) -> Result<Option<String>, AssertionError> {
        match &self.source {
            TokenSource::Workload { token_file, .. } => read_credential_file(Path::new(token_file))
                .map(Some)
                .map_err(|e| AssertionError::TokenFile {
                    path: token_file.clone(),
                    why: e.to_string(),
                }),
            TokenSource::Certificate {
                client_id,
                cert_path,
                ..
            } => {
                let certificate = |why: String| AssertionError::Certificate {
                    path: cert_path.clone(),
                    why,
                };
                let pem = read_regular_file(Path::new(cert_path), CREDENTIAL_FILE_MAX)
                    .map_err(|e| certificate(e.to_string()))?;
                let now = SystemTime::now();
                let jti = format!(
                    "karu-{}-{}",
                    std::process::id(),
                    now.duration_since(std::time::UNIX_EPOCH)
                        .unwrap_or_default()
                        .as_nanos()
                );
                let audience = self.source.token_url().unwrap_or_default();
                assertion::build(&pem, &audience, client_id, now, &jti)
                    .map(Some)
                    .map_err(|why| certificate(why.to_string()))
            }
            _ => Ok(None),
        }
    }
}

impl CredentialProvider for TokenProvider {
    fn fetch(&self, ctx: &FetchContext) -> Result<Credential, Error> {
        let what = self.source.name();
        let assertion = self.assertion().map_err(|e| lookup_failed(what, e))?;
        let token = fetch_token(ctx, what, self.source.request(assertion.as_deref()))?;
        Ok(Credential::new(AzureSecret::Bearer(token.token)).with_expiry(token.expires))
    }
}
