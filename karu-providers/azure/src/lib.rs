//! Karu's Azure Blob Storage and Data Lake Storage provider.
//!
//! | file | what it holds |
//! | --- | --- |
//! | `lib.rs` | this overview, [`SCHEMES`], [`PATTERNS`], [`SECTION`], [`FAMILY`], [`VERSION`], [`register`] |
//! | `config.rs` | [`AzureConfig`], the `[azure]` section, connection strings, the `AZURE_STORAGE_*` names |
//! | `backend.rs` | [`AzureBackend`], the [`Backend`](karu_engine::sdk::Backend) implementation |
//! | `request.rs` | address parsing, request URLs, the error answers that ask for a correction |
//! | `shared_key.rs` | Shared Key signing, from the documented string-to-sign rules |
//! | `credential.rs` | the secret, its lookup per scope, constructors for callbacks |
//! | `assertion.rs` | a certificate's RS256 client assertion |
//! | `token.rs` | the documented Entra ID and managed-identity token requests, and their answers |
//! | `identity.rs` | sends them (rustls, through the SDK's credential bridge) |
//!
//! It is built on the provider SDK, [`karu_engine::sdk`], only; its mock is the testkit's
//! `AzureMock` (Shared Key verified independently on every request).
//!
//! # Addresses
//!
//! - `az://container/path` and `azure://container/path`: the account comes from the
//!   configuration (`azure.account`, a connection string, `AZURE_STORAGE_ACCOUNT_NAME`); the
//!   path is taken as written. Canonical path: `az://container/path`.
//! - `abfs[s]://container@account.dfs.core.windows.net/path`,
//!   `https://account.blob.core.windows.net/container/path` and the `dfs` host (also in the
//!   China and US Government clouds): the path percent-decoded once. Canonical path: the blob
//!   URL, `https://account.blob.core.windows.net/container/path`, with a SAS query of the URL
//!   kept (and redacted wherever it is shown).
//!
//! Requests go to `https://account.blob.<cloud>/container/path`, the path encoded exactly
//! once, or below `azure.endpoint` (a connection string's `BlobEndpoint`), e.g. Azurite's
//! `http://127.0.0.1:10000/devstoreaccount1`.
//!
//! # Requests
//!
//! Ranged `GET`s with `Range`, `x-ms-version` pinned to [`VERSION`]. Azure ignores suffix
//! ranges (`bytes=-n`), so the backend declares none: `read_ends` reads the head, then the
//! tail with `If-Match` on the head's ETag (a change between them is `PreconditionFailed`).
//! Answers are checked by the engine like every provider's; a `Content-Range` Azure (or
//! Azurite) cannot mean, such as `bytes NaN-…`, is a protocol error.
//!
//! # Credentials
//!
//! First found wins: `azure.anonymous` (public containers); a SAS in the address; the
//! section's `bearer_token`, `sas_token`, `account_key` (Shared Key), `connection_string`
//! (`AccountKey` or `SharedAccessSignature`); a token: a service principal's client secret
//! or certificate (`client_certificate_path`, an RS256 client assertion), a workload identity's federated token file (`tenant_id`, `client_id`, or
//! `AZURE_TENANT_ID`, `AZURE_CLIENT_ID`, `AZURE_CLIENT_SECRET`, `AZURE_FEDERATED_TOKEN_FILE`),
//! a managed identity (`use_managed_identity`: IMDS; App Service's `IDENTITY_ENDPOINT` and
//! `IDENTITY_HEADER`), each token carrying its expiry into the cache; then
//! `AZURE_STORAGE_CONNECTION_STRING`,
//! `AZURE_STORAGE_ACCOUNT_KEY`, `AZURE_STORAGE_SAS_TOKEN`, `AZURE_STORAGE_TOKEN`. An
//! application's callback for the family [`FAMILY`] returns [`shared_key_credential`],
//! [`sas_credential`] or [`bearer_credential`]. A `401` saying a bearer token expired
//! authenticates once more.
//!
//! ```
//! let mut registry = karu_engine::sdk::RegistryBuilder::new();
//! karu_provider_azure::register(&mut registry);
//! let registry = registry.build()?;
//! let a = registry.resolve("abfss://data@acct.dfs.core.windows.net/dir/a%20b.bin")?;
//! let b = registry.resolve("https://acct.blob.core.windows.net/data/dir/a%20b.bin")?;
//! assert_eq!(a.canonical(), b.canonical());
//! assert_eq!(a.container(), Some("acct/data"));
//! assert_eq!(a.key(), "dir/a b.bin");
//! let c = registry.resolve("az://data/dir/a b.bin")?;
//! assert_eq!(c.canonical().as_str(), "az://data/dir/a b.bin");
//! # Ok::<(), karu_engine::sdk::Error>(())
//! ```

mod assertion;
mod backend;
mod config;
mod credential;
mod identity;
mod request;
mod shared_key;
mod token;

use std::sync::Arc;

use karu_engine::sdk::{RegistryBuilder, Section};

pub use backend::AzureBackend;
pub use config::AzureConfig;
pub use credential::{bearer_credential, sas_credential, shared_key_credential};

/// The URI schemes this provider serves.
pub const SCHEMES: [&str; 4] = ["az", "azure", "abfs", "abfss"];

/// Address prefixes of Azure storage URLs, registered besides the schemes.
pub const PATTERNS: [&str; 6] = [
    "https://*.blob.core.windows.net/",
    "https://*.dfs.core.windows.net/",
    "https://*.blob.core.chinacloudapi.cn/",
    "https://*.dfs.core.chinacloudapi.cn/",
    "https://*.blob.core.usgovcloudapi.net/",
    "https://*.dfs.core.usgovcloudapi.net/",
];

/// The configuration section (`[azure]`, `[paths."az://container/prefix".azure]`).
pub const SECTION: &str = "azure";

/// The credential family (for application callbacks).
pub const FAMILY: &str = "azure";

/// The storage service version every request pins with `x-ms-version`: 2023-11-03, which
/// serves ranged reads with `Range` and bearer tokens, and which Azurite 3.35 serves.
pub const VERSION: &str = "2023-11-03";

/// The `[azure]` section, declared so that a client checks it (and its path-rule overrides)
/// when it is built; its secret keys are redacted.
pub fn config_section() -> Section {
    Section::of::<AzureConfig>(SECTION)
}

/// Register the Azure provider: its schemes and URL prefixes, the `azure` credential family,
/// the `[azure]` section.
pub fn register(registry: &mut RegistryBuilder) {
    let mut provider = registry.provider(Arc::new(AzureBackend::new()));
    provider
        .credential_family(FAMILY)
        .config_section(config_section());
    for scheme in SCHEMES {
        provider.scheme(scheme);
    }
    for pattern in PATTERNS {
        provider.prefix(pattern);
    }
}

/// This crate's README, whose examples are compiled (and run, where they need no network) as
/// documentation tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct Readme;
