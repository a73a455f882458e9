//! Karu's Amazon S3 provider: `s3://bucket/key`, virtual-hosted and path-style S3 URLs, and
//! S3-compatible stores behind an endpoint override.
//!
//! The files of every provider crate:
//!
//! | file | what it holds |
//! | --- | --- |
//! | `lib.rs` | this overview, [`SCHEMES`], [`PATTERNS`], [`SECTION`], [`FAMILY`], [`config_section`], [`register`], [`sign`] (for providers that speak S3's protocol) |
//! | `config.rs` | [`S3Config`], the `[s3]` section and the `AWS_*` names it honours |
//! | `backend.rs` | [`S3Backend`], the [`Backend`](karu_engine::sdk::Backend) implementation |
//! | `request.rs` | address parsing, URL building, SigV4 signing, error answers |
//! | `credential.rs` | credential discovery (aws-config through the SDK's bridge) |
//!
//! It is built on the provider SDK, [`karu_engine::sdk`], only; its mock is the testkit's
//! `S3Mock` (SigV4 checked on every request), and `karu-testkit`'s conformance suite runs on it.
//!
//! Requests are signed late, for every attempt, with the `aws-sigv4` crate: method, path,
//! query, headers (the `Range` included), payload hash, time, service and region. A signed
//! request is never redirected: a wrong-region answer (301/400 naming the bucket's region in
//! `x-amz-bucket-region` or the body) makes the engine prepare and sign it again for that
//! region, once, and the backend remembers it for that bucket at that endpoint (the same
//! bucket name at another endpoint is another bucket); a region an AWS URL names travels with
//! its locator; an expired-token answer invalidates the scoped credential and authenticates
//! once more.
//!
//! Credentials are discovered in this order: explicit keys (configuration), then, when
//! discovery is enabled (the default), aws-config's default chain run on the environment
//! Karu captured when the client was built: environment keys, profiles (config and
//! credentials files, `credential_process`), web identity, container credentials, instance
//! metadata. `anonymous = true` sends unsigned requests.
//!
//! ```
//! let mut registry = karu_engine::sdk::RegistryBuilder::new();
//! karu_provider_s3::register(&mut registry);
//! let registry = registry.build()?;
//! let a = registry.resolve("s3://bucket/path/to/object.bin")?;
//! let b = registry.resolve("https://bucket.s3.eu-west-1.amazonaws.com/path/to/object.bin")?;
//! let c = registry.resolve("https://s3.eu-west-1.amazonaws.com/bucket/path/to/object.bin")?;
//! assert_eq!(a.canonical(), b.canonical());
//! assert_eq!(b.canonical(), c.canonical());
//! assert_eq!(a.container(), Some("bucket"));
//! assert_eq!(a.key(), "path/to/object.bin");
//! # Ok::<(), karu_engine::sdk::Error>(())
//! ```

mod backend;
mod config;
mod credential;
mod request;

use std::sync::Arc;
use std::time::SystemTime;

use karu_engine::sdk::{Credential, Error, PreparedRequest, RegistryBuilder, Section, Status};

pub use backend::S3Backend;
pub use config::{Addressing, S3Config};
pub use credential::{ProfileLookup, credential};

/// Sign `prepared` in place with SigV4 for the `s3` service in `region`, at `now`, with an S3
/// credential (from [`credential()`] or a [`ProfileLookup`]): what another provider whose
/// service speaks S3's protocol (Source Cooperative's data proxy) signs with, instead of a
/// copy. The request is not redirected afterwards (a signed request is rebuilt, never
/// redirected); a credential of another provider is a [`Status::Credentials`] error.
pub fn sign(
    prepared: &mut PreparedRequest,
    credential: &Credential,
    region: &str,
    now: SystemTime,
) -> Result<(), Error> {
    let secret = credential.get::<credential::S3Secret>().ok_or_else(|| {
        Error::new(
            Status::Credentials,
            "the credential is not an S3 key pair (make it with karu_provider_s3::credential)",
        )
    })?;
    prepared.options.follow_redirects = false;
    request::sign_request(
        &prepared.url,
        &mut prepared.headers,
        &secret.credentials,
        region,
        now,
    )
    .map_err(Error::from)
}

/// The URI schemes this provider registers.
pub const SCHEMES: [&str; 1] = ["s3"];

/// Address prefixes of S3 URLs on AWS, registered besides the scheme.
pub const PATTERNS: [&str; 2] = ["https://*.amazonaws.com/", "http://*.amazonaws.com/"];

/// The configuration section this provider reads (`[s3]`, and
/// `[paths."s3://bucket/prefix".s3]`).
pub const SECTION: &str = "s3";

/// The `[s3]` section, declared to the configuration so that a client checks it (and its
/// path-rule overrides) when it is built; its secret keys are redacted.
pub fn config_section() -> Section {
    Section::of::<S3Config>(SECTION)
}

/// The credential family of this provider (for application callbacks).
pub const FAMILY: &str = "aws";

/// Register the S3 provider: `s3://` and AWS S3 URLs, the `aws` credential family, the `[s3]`
/// section.
pub fn register(registry: &mut RegistryBuilder) {
    let mut provider = registry.provider(Arc::new(S3Backend::new()));
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
