//! Karu's Google Cloud Storage provider: `gs://bucket/key` and the GCS URLs users paste, read
//! through the XML API (or, from emulators, the JSON API's media downloads).
//!
//! The files of every provider crate:
//!
//! | file | what it holds |
//! | --- | --- |
//! | `lib.rs` | this overview, [`SCHEMES`], [`PATTERNS`], [`SECTION`], [`FAMILY`], [`config_section`], [`register`] |
//! | `config.rs` | [`GcsConfig`], the `[gcs]` section and the environment names it honours |
//! | `backend.rs` | [`GcsBackend`], the [`Backend`](karu_engine::sdk::Backend) implementation |
//! | `request.rs` | address parsing, URL building, HMAC signing, transformed answers, error answers |
//! | `credential.rs` | the credential order, and constructors for applications' callbacks |
//! | `token.rs` | the OAuth 2 exchanges: service-account JWT, authorized user, metadata server |
//!
//! **Addresses.** `gs://bucket/key` (the name as written), `https://storage.googleapis.com/
//! bucket/key`, `https://storage.cloud.google.com/bucket/key` and
//! `https://bucket.storage.googleapis.com/key` (the path percent-decoded once) are one object,
//! `gs://bucket/key`. Requests percent-encode the name exactly once (spaces, `+`, `%`,
//! unicode and `//` round-trip).
//!
//! **Requests.** A ranged `GET ENDPOINT/bucket/key` on the XML API, with
//! `Accept-Encoding: gzip`, so an object stored gzip-compressed comes back as stored and the
//! range counts stored bytes. The XML API by default: its path is the object name (no second
//! encoding of `/`), and it is the API HMAC keys sign for. With `STORAGE_EMULATOR_HOST` (or
//! `gcs.api = "json"`), the JSON API's media download instead,
//! `GET ENDPOINT/download/storage/v1/b/bucket/o/NAME?alt=media` with the name encoded as one
//! path segment: what Google's own clients send to an emulator, and what fake-gcs-server serves
//! at any host name. Both answer ranges with `206` and `Content-Range`, honour `If-Match`,
//! send the ETag and `x-goog-generation`, and transcode stored-gzip objects by the same rules,
//! so the same checks hold. An answer that GCS transformed (decompressed, or compressed on the
//! way: see `request::transformed`) is refused with `Protocol`, never delivered.
//!
//! **Versions.** `stat` returns the object's ETag; `if_match` is sent as `If-Match`, which
//! the XML API honours, and Karu still checks the answer's tag.
//!
//! **Credentials**, in the contract's order (`karu-engine/README.md`): a static token (`gcs.token` or
//! `GOOGLE_OAUTH_ACCESS_TOKEN`), HMAC keys (`gcs.hmac_access_id`, `gcs.hmac_secret`: requests
//! signed `GOOG4-HMAC-SHA256`), then Application Default Credentials (`gcs.credentials_file`
//! or `GOOGLE_APPLICATION_CREDENTIALS`: a service account's key or an authorized user's
//! refresh token; else the gcloud well-known file), then the compute metadata server
//! (`GCE_METADATA_HOST`). `gcs.anonymous = true` sends unauthenticated requests (public
//! buckets), and so does an endpoint from `STORAGE_EMULATOR_HOST` with no credential
//! configured. A `401` invalidates the token and authenticates once more.
//!
//! ```
//! let mut registry = karu_engine::sdk::RegistryBuilder::new();
//! karu_provider_gcs::register(&mut registry);
//! let registry = registry.build()?;
//! let a = registry.resolve("gs://bucket/path/to/a b.bin")?;
//! let b = registry.resolve("https://storage.googleapis.com/bucket/path/to/a%20b.bin")?;
//! let c = registry.resolve("https://bucket.storage.googleapis.com/path/to/a%20b.bin")?;
//! assert_eq!(a.canonical(), b.canonical());
//! assert_eq!(b.canonical(), c.canonical());
//! assert_eq!(a.container(), Some("bucket"));
//! assert_eq!(a.key(), "path/to/a b.bin");
//! # Ok::<(), karu_engine::sdk::Error>(())
//! ```

mod backend;
mod config;
mod credential;
mod request;
mod token;

use std::sync::Arc;

use karu_engine::sdk::{RegistryBuilder, Section};

pub use backend::GcsBackend;
pub use config::{Api, GcsConfig};
pub use credential::{credential, hmac_credential};

/// The URI schemes this provider registers.
pub const SCHEMES: [&str; 1] = ["gs"];

/// Address prefixes of GCS URLs, registered besides the scheme.
pub const PATTERNS: [&str; 6] = [
    "https://storage.googleapis.com/",
    "https://storage.cloud.google.com/",
    "https://*.storage.googleapis.com/",
    "http://storage.googleapis.com/",
    "http://storage.cloud.google.com/",
    "http://*.storage.googleapis.com/",
];

/// The configuration section this provider reads (`[gcs]`, and
/// `[paths."gs://bucket/prefix".gcs]`).
pub const SECTION: &str = "gcs";

/// The credential family of this provider (for application callbacks).
pub const FAMILY: &str = "gcp";

/// The `[gcs]` section, declared to the configuration so that a client checks it (and its
/// path-rule overrides) when it is built; its secret keys are redacted.
pub fn config_section() -> Section {
    Section::of::<GcsConfig>(SECTION)
}

/// Register the GCS provider: `gs://` and GCS URLs, the `gcp` credential family, the `[gcs]`
/// section.
pub fn register(registry: &mut RegistryBuilder) {
    let mut provider = registry.provider(Arc::new(GcsBackend::new()));
    provider
        .scheme(SCHEMES[0])
        .credential_family(FAMILY)
        .config_section(config_section());
    for pattern in PATTERNS {
        provider.prefix(pattern);
    }
}
