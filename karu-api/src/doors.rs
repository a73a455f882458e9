//! The doors to the credential crates of the Azure and Google ecosystems: an application that
//! already holds an `azure_core::credentials::TokenCredential` (any `azure_identity`
//! credential: `DefaultAzureCredential`, `ManagedIdentityCredential`, ...) or a
//! `gcp_auth::TokenProvider` hands it to the client, which asks it for tokens as it asks an
//! application's [credential callback](crate::ClientBuilder::credential_callback): on a
//! credential worker, bounded by the deadline of the read that asked, its tokens cached under
//! the prefix given and refreshed in the last tenth of their own lifetime by Karu's credential
//! cache. A door answers only for the canonical paths under its prefix: a read of another
//! path of the family fails with `Credentials`, and its credential is not asked.
//!
//! Karu's own discovery chains stay the default (they read the environment the client
//! captured, honour `http.ca_file`, and need no second HTTP stack); these crates are used only
//! here, behind the features `azure-core` and `gcp-auth` (off by default).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use karu_engine::sdk::{CanonicalPath, Error, Status, system_time_after};

/// A Unix timestamp (seconds) as a time; before the epoch is the epoch.
fn at_unix(seconds: i64) -> SystemTime {
    system_time_after(
        UNIX_EPOCH,
        Duration::from_secs(seconds.max(0).unsigned_abs()),
    )
}

/// The canonical prefix a door answers under.
#[derive(Debug)]
struct Prefix(String);

impl Prefix {
    /// `Ok` when `path` is under the prefix; else why the door does not answer for it.
    fn covers(&self, path: &CanonicalPath, door: &str) -> Result<(), Error> {
        if path.is_under(&self.0) {
            return Ok(());
        }
        Err(Error::new(
            Status::Credentials,
            format!(
                "{door} given to the client authenticates the canonical paths under {:?}, \
                 not {}; give it a prefix that covers both, or the family's scheme alone",
                self.0,
                path.redacted()
            ),
        ))
    }
}

#[cfg(feature = "azure-core")]
mod azure {
    use std::sync::Arc;

    use karu_engine::sdk::{
        CallbackCredential, CanonicalPath, CredentialCallback, Error, FetchContext, bridge,
    };

    use super::{Prefix, at_unix};
    use crate::ClientBuilder;

    /// What the door is called in messages.
    const DOOR: &str = "the Azure TokenCredential";

    /// Asks an `azure_core` credential for Azure Storage tokens.
    struct AzureDoor {
        prefix: Prefix,
        credential: Arc<dyn azure_core::credentials::TokenCredential>,
    }

    impl CredentialCallback for AzureDoor {
        fn credential(&self, path: &CanonicalPath) -> Result<CallbackCredential, Error> {
            self.credential_within(path, &FetchContext::new(None))
        }

        fn credential_within(
            &self,
            path: &CanonicalPath,
            ctx: &FetchContext,
        ) -> Result<CallbackCredential, Error> {
            /// The OAuth scope of Azure Storage.
            const SCOPE: &str = "https://storage.azure.com/.default";
            self.prefix.covers(path, DOOR)?;
            let token = bridge::block_on(
                ctx,
                "the application's Azure TokenCredential",
                self.credential.get_token(&[SCOPE], None),
            )?;
            let expires = at_unix(token.expires_on.unix_timestamp());
            let credential =
                karu_providers::azure::bearer_credential(token.token.secret(), Some(expires));
            Ok(CallbackCredential::for_prefix(credential, &self.prefix.0))
        }
    }

    impl ClientBuilder {
        /// Authenticate the `azure` family (Azure Blob and Data Lake Storage) with
        /// `credential`, any `azure_identity` credential, instead of Karu's own discovery. Its
        /// tokens (scope `https://storage.azure.com/.default`) are asked for by the canonical
        /// paths under `prefix` (`"az://"` for all of them, `"az://container"` or
        /// `"az://account/container"` for one container, as canonical paths spell them),
        /// within the deadline of the read that asks, cached for every path under it and asked
        /// for again in the last tenth of their lifetime, or when a read's `401` says one
        /// expired. A read of a path of the family outside `prefix` fails with `Credentials`.
        /// It replaces a [`credential_callback`](ClientBuilder::credential_callback) of the
        /// family (one door or callback per family). Feature `azure-core`.
        pub fn azure_token_credential(
            self,
            prefix: impl Into<String>,
            credential: Arc<dyn azure_core::credentials::TokenCredential>,
        ) -> Self {
            let door = AzureDoor {
                prefix: Prefix(prefix.into()),
                credential,
            };
            self.credential_callback(karu_providers::azure::FAMILY, door)
        }
    }
}

#[cfg(feature = "gcp-auth")]
mod gcp {
    use std::sync::Arc;

    use karu_engine::sdk::{
        CallbackCredential, CanonicalPath, CredentialCallback, Error, FetchContext, bridge,
    };

    use super::{Prefix, at_unix};
    use crate::ClientBuilder;

    /// What the door is called in messages.
    const DOOR: &str = "the gcp_auth TokenProvider";

    /// Asks a `gcp_auth` token provider for Cloud Storage tokens.
    struct GcpDoor {
        prefix: Prefix,
        provider: Arc<dyn gcp_auth::TokenProvider>,
    }

    impl CredentialCallback for GcpDoor {
        fn credential(&self, path: &CanonicalPath) -> Result<CallbackCredential, Error> {
            self.credential_within(path, &FetchContext::new(None))
        }

        fn credential_within(
            &self,
            path: &CanonicalPath,
            ctx: &FetchContext,
        ) -> Result<CallbackCredential, Error> {
            /// The scope Karu reads with.
            const SCOPE: &str = "https://www.googleapis.com/auth/devstorage.read_only";
            self.prefix.covers(path, DOOR)?;
            let token = bridge::block_on(
                ctx,
                "the application's gcp_auth TokenProvider",
                self.provider.token(&[SCOPE]),
            )?;
            let expires = at_unix(token.expires_at().timestamp());
            let credential = karu_providers::gcs::credential(token.as_str(), Some(expires));
            Ok(CallbackCredential::for_prefix(credential, &self.prefix.0))
        }
    }

    impl ClientBuilder {
        /// Authenticate the `gcp` family (Google Cloud Storage) with `provider`, a `gcp_auth`
        /// token provider, instead of Karu's own discovery. Its tokens (scope
        /// `https://www.googleapis.com/auth/devstorage.read_only`) are asked for by the
        /// canonical paths under `prefix` (`"gs://"` for all of them, `"gs://bucket"` for one
        /// bucket), within the deadline of the read that asks, cached for every path under it
        /// and asked for again in the last tenth of their lifetime, or when a read's `401` says
        /// one expired. A read of a path of the family outside `prefix` fails with
        /// `Credentials`. It replaces a
        /// [`credential_callback`](ClientBuilder::credential_callback) of the family (one door
        /// or callback per family). Feature `gcp-auth`.
        pub fn gcp_token_provider(
            self,
            prefix: impl Into<String>,
            provider: Arc<dyn gcp_auth::TokenProvider>,
        ) -> Self {
            let door = GcpDoor {
                prefix: Prefix(prefix.into()),
                provider,
            };
            self.credential_callback(karu_providers::gcs::FAMILY, door)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_door_covers_the_paths_under_its_prefix_on_whole_segments() {
        let door = Prefix("gs://bkt".into());
        for path in ["gs://bkt", "gs://bkt/a.bin", "gs://bkt/dir/a.bin"] {
            assert!(
                door.covers(&CanonicalPath::new(path), "door").is_ok(),
                "{path}"
            );
        }
        for path in ["gs://bkt2/a.bin", "gs://other/a.bin"] {
            let error = door.covers(&CanonicalPath::new(path), "door").unwrap_err();
            assert_eq!(error.status(), Status::Credentials);
            assert!(error.message().contains("\"gs://bkt\""), "{error}");
        }
        // A path's query (a SAS) stays out of the message.
        let error = Prefix("az://data".into())
            .covers(&CanonicalPath::new("az://other/a.bin?sig=SECRET"), "door")
            .unwrap_err();
        assert!(!error.message().contains("SECRET"), "{error}");
        assert!(
            Prefix("gs://".into())
                .covers(&CanonicalPath::new("gs://any/x"), "door")
                .is_ok()
        );
    }
}
