//! Karu's Amazon S3 provider: `s3://bucket/key`, virtual-hosted and path-style S3 URLs, and
//! S3-compatible stores behind an endpoint override.
//!
//! The rooms of every provider crate:
//!
//! | file | what it holds |
//! | --- | --- |
//! | `lib.rs` | this overview, [`SCHEME`], [`PATTERNS`], [`SECTION`], [`config_section`], [`register`] |
//! | `config.rs` | [`S3Config`], the `[s3]` section and the `AWS_*` names it honours |
//! | `backend.rs` | [`S3Backend`], the [`Backend`](karu_engine::Backend) implementation |
//! | `request.rs` | address parsing, URL building, SigV4 signing, error answers |
//! | `credential.rs` | credential discovery and the credential scope |
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
//! let registry = karu_engine::Registry::new();
//! karu_provider_s3::register(&registry);
//! let a = registry.resolve("s3://bucket/path/to/object.bin")?;
//! let b = registry.resolve("https://bucket.s3.eu-west-1.amazonaws.com/path/to/object.bin")?;
//! let c = registry.resolve("https://s3.eu-west-1.amazonaws.com/bucket/path/to/object.bin")?;
//! assert_eq!(a.canonical(), b.canonical());
//! assert_eq!(b.canonical(), c.canonical());
//! assert_eq!(a.container(), Some("bucket"));
//! assert_eq!(a.key(), "path/to/object.bin");
//! # Ok::<(), karu_engine::Error>(())
//! ```

mod backend;
mod config;
mod credential;
mod request;

use std::sync::Arc;

pub use backend::S3Backend;
pub use config::{Addressing, S3Config};
pub use credential::credential;

/// The URI scheme of S3 objects.
pub const SCHEME: &str = "s3";

/// Address prefixes of S3 URLs on AWS, registered besides the scheme.
pub const PATTERNS: [&str; 2] = ["https://*.amazonaws.com/", "http://*.amazonaws.com/"];

/// The configuration section this provider reads (`[s3]`, and
/// `[paths."s3://bucket/prefix".s3]`).
pub const SECTION: &str = "s3";

/// The `[s3]` section, declared to the configuration so that a client checks it (and its
/// path-rule overrides) when it is built; its secret keys are redacted.
pub fn config_section() -> karu_config::Section {
    karu_config::Section::of::<S3Config>(SECTION)
}

/// The credential family of this provider (for application callbacks).
pub const FAMILY: &str = "aws";

/// Register the S3 provider for `s3://` and AWS S3 URLs.
pub fn register(registry: &karu_engine::Registry) {
    let backend = Arc::new(S3Backend::new());
    registry.register(SCHEME, backend.clone());
    for pattern in PATTERNS {
        registry.register(pattern, backend.clone());
    }
}
