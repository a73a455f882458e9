//! The adapters to the credential crates of the Azure and Google ecosystems: an application that
//! already holds an `azure_core::credentials::TokenCredential` (any `azure_identity`
//! credential: `DefaultAzureCredential`, `ManagedIdentityCredential`, ...) or a
//! `gcp_auth::TokenProvider` hands it to the client, which asks it for tokens as it asks an
//! application's [credential callback](crate::ClientBuilder::credential_callback): on a
//! credential worker, bounded by the deadline of the read that asked, its tokens cached under
//! the prefix given and refreshed in the last tenth of their own lifetime by Karu's credential
//! cache. An adapter answers only for the canonical paths under its prefix: a read of another
//! path of the family fails with `Credentials`, and its credential is not asked.
//!
//! Karu's own discovery chains stay the default (they read the environment the client
//! captured, honour `http.ca_file`, and need no second HTTP stack); these crates are used only
//! here, behind the features `azure-core` and `gcp-auth` (off by default).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use karu_engine::sdk::{
    CallbackCredential, CanonicalPath, Credential, CredentialCallback, Error, FetchContext, Status,
    system_time_after,
};

/// A Unix timestamp (seconds) as a time; before the epoch is the epoch.
fn at_unix(seconds: i64) -> SystemTime {
    system_time_after(
        UNIX_EPOCH,
        Duration::from_secs(seconds.max(0).unsigned_abs()),
    )
}

/// Asks the application's credential for a token, as a credential of the family, within the
/// lookup's context (its deadline).
type AskToken = Box<dyn Fn(&FetchContext) -> Result<Credential, Error> + Send + Sync>;

/// Asks an application's credential of an SDK for tokens: for the canonical paths under its
/// prefix only, within the lookup's context.
struct CredentialAdapter {
    /// What it is called in messages (`"the Azure TokenCredential"`).
    name: &'static str,
    /// The canonical prefix it answers under.
    prefix: String,
    /// Asks for a token.
    token: AskToken,
}

impl CredentialAdapter {
    /// `Ok` when `path` is under the prefix; else why the adapter does not answer for it.
    fn covers(&self, path: &CanonicalPath) -> Result<(), Error> {
        if path.is_under(&self.prefix) {
            return Ok(());
        }
        Err(Error::new(
            Status::Credentials,
            format!(
                "{} given to the client authenticates the canonical paths under {:?}, not {}; \
                 give it a prefix that covers both, or the family's scheme alone",
                self.name,
                self.prefix,
                path.redacted()
            ),
        ))
    }
}

impl CredentialCallback for CredentialAdapter {
    fn credential(&self, path: &CanonicalPath) -> Result<CallbackCredential, Error> {
        self.credential_within(path, &FetchContext::new(None))
    }

    fn credential_within(
        &self,
        path: &CanonicalPath,
        ctx: &FetchContext,
    ) -> Result<CallbackCredential, Error> {
        self.covers(path)?;
        let credential = (self.token)(ctx)?;
        Ok(CallbackCredential::for_prefix(credential, &self.prefix))
    }
}

#[cfg(feature = "azure-core")]
impl crate::ClientBuilder {
    /// Authenticate the `azure` family (Azure Blob and Data Lake Storage) with `credential`,
    /// any `azure_identity` credential, instead of Karu's own discovery. Its tokens (scope
    /// `https://storage.azure.com/.default`) are asked for by the canonical paths under
    /// `prefix` (`"az://"` for all of them, `"az://container"` or `"az://account/container"`
    /// for one container, as canonical paths spell them), within the deadline of the read
    /// that asks, cached for every path under it and asked for again in the last tenth of
    /// their lifetime, or when a read's `401` says one expired. A read of a path of the family
    /// outside `prefix` fails with `Credentials`. It replaces a
    /// [`credential_callback`](crate::ClientBuilder::credential_callback) of the family (one
    /// adapter or callback per family). Feature `azure-core`.
    pub fn azure_token_credential(
        self,
        prefix: impl Into<String>,
        credential: std::sync::Arc<dyn azure_core::credentials::TokenCredential>,
    ) -> Self {
        /// The OAuth scope of Azure Storage.
        const SCOPE: &str = "https://storage.azure.com/.default";
        let adapter = CredentialAdapter {
            name: "the Azure TokenCredential",
            prefix: prefix.into(),
            token: Box::new(move |ctx| {
                let token = karu_engine::sdk::bridge::block_on(
                    ctx,
                    "the application's Azure TokenCredential",
                    credential.get_token(&[SCOPE], None),
                )?;
                let expires = at_unix(token.expires_on.unix_timestamp());
                Ok(karu_providers::azure::bearer_credential(
                    token.token.secret(),
                    Some(expires),
                ))
            }),
        };
        self.credential_callback(karu_providers::azure::FAMILY, adapter)
    }
}

#[cfg(feature = "gcp-auth")]
impl crate::ClientBuilder {
    /// Authenticate the `gcp` family (Google Cloud Storage) with `provider`, a `gcp_auth`
    /// token provider, instead of Karu's own discovery. Its tokens (scope
    /// `https://www.googleapis.com/auth/devstorage.read_only`) are asked for by the canonical
    /// paths under `prefix` (`"gs://"` for all of them, `"gs://bucket"` for one bucket),
    /// within the deadline of the read that asks, cached for every path under it and asked
    /// for again in the last tenth of their lifetime, or when a read's `401` says one expired.
    /// A read of a path of the family outside `prefix` fails with `Credentials`. It replaces
    /// a [`credential_callback`](crate::ClientBuilder::credential_callback) of the family (one
    /// adapter or callback per family). Feature `gcp-auth`.
    pub fn gcp_token_provider(
        self,
        prefix: impl Into<String>,
        provider: std::sync::Arc<dyn gcp_auth::TokenProvider>,
    ) -> Self {
        /// The scope Karu reads with.
        const SCOPE: &str = "https://www.googleapis.com/auth/devstorage.read_only";
        let adapter = CredentialAdapter {
            name: "the gcp_auth TokenProvider",
            prefix: prefix.into(),
            token: Box::new(move |ctx| {
                let token = karu_engine::sdk::bridge::block_on(
                    ctx,
                    "the application's gcp_auth TokenProvider",
                    provider.token(&[SCOPE]),
                )?;
                let expires = at_unix(token.expires_at().timestamp());
                Ok(karu_providers::gcs::credential(
                    token.as_str(),
                    Some(expires),
                ))
            }),
        };
        self.credential_callback(karu_providers::gcs::FAMILY, adapter)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An adapter under `prefix` whose credential is never asked.
    fn adapter(prefix: &str) -> CredentialAdapter {
        CredentialAdapter {
            name: "the test adapter",
            prefix: prefix.into(),
            token: Box::new(|_| unreachable!("the prefix alone decides")),
        }
    }

    #[test]
    fn an_adapter_covers_the_paths_under_its_prefix_on_whole_segments() {
        let bucket = adapter("gs://bkt");
        for path in ["gs://bkt", "gs://bkt/a.bin", "gs://bkt/dir/a.bin"] {
            assert!(bucket.covers(&CanonicalPath::new(path)).is_ok(), "{path}");
        }
        for path in ["gs://bkt2/a.bin", "gs://other/a.bin"] {
            let error = bucket.covers(&CanonicalPath::new(path)).unwrap_err();
            assert_eq!(error.status(), Status::Credentials);
            assert!(error.message().contains("\"gs://bkt\""), "{error}");
            // Refused before the credential is asked.
            let refused = bucket.credential(&CanonicalPath::new(path)).unwrap_err();
            assert_eq!(refused.status(), Status::Credentials);
        }
        // A path's query (a SAS) stays out of the message.
        let error = adapter("az://data")
            .covers(&CanonicalPath::new("az://other/a.bin?sig=SECRET"))
            .unwrap_err();
        assert!(!error.message().contains("SECRET"), "{error}");
        assert!(
            adapter("gs://")
                .covers(&CanonicalPath::new("gs://any/x"))
                .is_ok()
        );
    }
}
