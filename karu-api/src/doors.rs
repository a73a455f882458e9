//! The doors to the credential crates of the Azure and Google ecosystems: an application that
//! already holds an `azure_core::credentials::TokenCredential` (any `azure_identity`
//! credential: `DefaultAzureCredential`, `ManagedIdentityCredential`, ...) or a
//! `gcp_auth::TokenProvider` hands it to the client, which asks it for tokens as it asks an
//! application's [credential callback](crate::ClientBuilder::credential_callback): on a
//! credential worker, bounded, its tokens cached under the prefix given and refreshed in the
//! last tenth of their own lifetime by Karu's credential cache.
//!
//! Karu's own discovery chains stay the default (they read the environment the client
//! captured, honour `http.ca_file`, and need no second HTTP stack); these crates are used only
//! here, behind the features `azure-core` and `gcp-auth` (off by default).

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use karu_engine::sdk::{
    CallbackCredential, CanonicalPath, CredentialCallback, Error, FetchContext, bridge,
    system_time_after,
};

use crate::ClientBuilder;

/// A Unix timestamp (seconds) as a time; before the epoch is the epoch.
fn at_unix(seconds: i64) -> SystemTime {
    system_time_after(
        UNIX_EPOCH,
        Duration::from_secs(seconds.max(0).unsigned_abs()),
    )
}

/// Asks an `azure_core` credential for Azure Storage tokens.
#[cfg(feature = "azure-core")]
struct AzureDoor {
    prefix: String,
    credential: Arc<dyn azure_core::credentials::TokenCredential>,
}

#[cfg(feature = "azure-core")]
impl CredentialCallback for AzureDoor {
    fn credential(&self, _path: &CanonicalPath) -> Result<CallbackCredential, Error> {
        /// The OAuth scope of Azure Storage.
        const SCOPE: &str = "https://storage.azure.com/.default";
        let token = bridge::block_on(
            &FetchContext::new(None),
            "the application's Azure TokenCredential",
            self.credential.get_token(&[SCOPE], None),
        )?;
        let expires = at_unix(token.expires_on.unix_timestamp());
        let credential =
            karu_providers::azure::bearer_credential(token.token.secret(), Some(expires));
        Ok(CallbackCredential::for_prefix(credential, &self.prefix))
    }
}

/// Asks a `gcp_auth` token provider for Cloud Storage tokens.
#[cfg(feature = "gcp-auth")]
struct GcpDoor {
    prefix: String,
    provider: Arc<dyn gcp_auth::TokenProvider>,
}

#[cfg(feature = "gcp-auth")]
impl CredentialCallback for GcpDoor {
    fn credential(&self, _path: &CanonicalPath) -> Result<CallbackCredential, Error> {
        /// The scope Karu reads with.
        const SCOPE: &str = "https://www.googleapis.com/auth/devstorage.read_only";
        let token = bridge::block_on(
            &FetchContext::new(None),
            "the application's gcp_auth TokenProvider",
            self.provider.token(&[SCOPE]),
        )?;
        let expires = at_unix(token.expires_at().timestamp());
        let credential = karu_providers::gcs::credential(token.as_str(), Some(expires));
        Ok(CallbackCredential::for_prefix(credential, &self.prefix))
    }
}

impl ClientBuilder {
    /// Authenticate the `azure` family (Azure Blob and Data Lake Storage) with `credential`,
    /// any `azure_identity` credential, instead of Karu's own discovery. Its tokens (scope
    /// `https://storage.azure.com/.default`) are cached for every canonical path under
    /// `prefix` (`"az://"` for all of them, `"az://account/container"` for one container) and
    /// asked for again in the last tenth of their lifetime, or when a read's `401` says one
    /// expired. It replaces a [`credential_callback`](ClientBuilder::credential_callback) of
    /// the family (one door or callback per family). Feature `azure-core`.
    #[cfg(feature = "azure-core")]
    pub fn azure_token_credential(
        self,
        prefix: impl Into<String>,
        credential: Arc<dyn azure_core::credentials::TokenCredential>,
    ) -> Self {
        let door = AzureDoor {
            prefix: prefix.into(),
            credential,
        };
        self.credential_callback(karu_providers::azure::FAMILY, door)
    }

    /// Authenticate the `gcp` family (Google Cloud Storage) with `provider`, a `gcp_auth`
    /// token provider, instead of Karu's own discovery. Its tokens (scope
    /// `https://www.googleapis.com/auth/devstorage.read_only`) are cached for every canonical
    /// path under `prefix` (`"gs://"` for all of them, `"gs://bucket"` for one bucket) and
    /// asked for again in the last tenth of their lifetime, or when a read's `401` says one
    /// expired. It replaces a [`credential_callback`](ClientBuilder::credential_callback) of
    /// the family (one door or callback per family). Feature `gcp-auth`.
    #[cfg(feature = "gcp-auth")]
    pub fn gcp_token_provider(
        self,
        prefix: impl Into<String>,
        provider: Arc<dyn gcp_auth::TokenProvider>,
    ) -> Self {
        let door = GcpDoor {
            prefix: prefix.into(),
            provider,
        };
        self.credential_callback(karu_providers::gcs::FAMILY, door)
    }
}
