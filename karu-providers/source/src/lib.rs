//! Karu's Source Cooperative provider: files of data products published on
//! [Source Cooperative](https://source.coop), read through its data proxy.
//!
//! The files of every provider crate:
//!
//! | file | what it holds |
//! | --- | --- |
//! | `lib.rs` | this overview, [`SCHEMES`], [`PATTERNS`], [`SECTION`], [`FAMILY`], [`config_section`], [`register`] |
//! | `config.rs` | [`SourceConfig`], the `[source]` section |
//! | `backend.rs` | [`SourceBackend`], the [`Backend`](karu_engine::sdk::Backend) implementation |
//! | `request.rs` | addresses and request URLs |
//! | `credential.rs` | anonymous reads, Source's own profile, [`credential()`] for callbacks |
//!
//! Addresses: `source://account/product/path` and the
//! `https://data.source.coop/account/product/path` URLs, resolved to one canonical path
//! (`source://account/product/path`); `source.endpoint` overrides the data proxy.
//!
//! Reads are anonymous by default (public data). Signed access uses Source's own credentials,
//! a scope separate from S3's: a profile of the AWS config files whose credentials come from
//! a `credential_process` (as Source's CLI sets up: `credential_process = source-coop creds`),
//! a `credential_process` or an API key in the section, or an application's callback for the
//! `source` family. Requests are signed with SigV4 against the data proxy by the S3 provider's
//! [`sign`](karu_provider_s3::sign), not a copy of it.
//!
//! ```
//! let mut registry = karu_engine::sdk::RegistryBuilder::new();
//! karu_provider_source::register(&mut registry);
//! let registry = registry.build()?;
//! let a = registry.resolve("source://cholmes/admin-boundaries/countries.parquet")?;
//! let b = registry.resolve("https://data.source.coop/cholmes/admin-boundaries/countries.parquet")?;
//! assert_eq!(a.canonical(), b.canonical());
//! assert_eq!(a.container(), Some("cholmes/admin-boundaries"));
//! # Ok::<(), karu_engine::sdk::Error>(())
//! ```

mod backend;
mod config;
mod credential;
mod request;

use std::sync::Arc;

use karu_engine::sdk::{RegistryBuilder, Section};

pub use backend::SourceBackend;
pub use config::SourceConfig;
pub use credential::credential;

/// The URI schemes this provider registers.
pub const SCHEMES: [&str; 1] = ["source"];

/// The data proxy's URL prefix, registered besides the scheme.
pub const PATTERNS: [&str; 1] = ["https://data.source.coop/"];

/// The configuration section (`[source]`, `[paths."source://account".source]`).
pub const SECTION: &str = "source";

/// The credential family (for application callbacks).
pub const FAMILY: &str = "source";

/// The `[source]` section, declared by [`register`] so that a client checks it (and its
/// path-rule overrides) when it is built; its secret keys are redacted.
pub fn config_section() -> Section {
    Section::of::<SourceConfig>(SECTION)
}

/// Register the Source Cooperative provider: `source://` and data proxy URLs, the `source`
/// credential family, the `[source]` section.
pub fn register(registry: &mut RegistryBuilder) {
    let mut provider = registry.provider(Arc::new(SourceBackend::new()));
    provider
        .scheme(SCHEMES[0])
        .credential_family(FAMILY)
        .config_section(config_section());
    for pattern in PATTERNS {
        provider.prefix(pattern);
    }
}

/// This crate's README, whose examples are compiled (and run, where they need no network) as
/// documentation tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct Readme;
