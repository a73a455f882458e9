//! Karu's plain HTTP provider: `http://` and `https://` URLs served by any server that honours
//! `Range`.
//!
//! The files of every provider crate:
//!
//! | file | what it holds |
//! | --- | --- |
//! | `lib.rs` | this overview, [`SCHEMES`], [`SECTION`], [`config_section`], [`register`] |
//! | `config.rs` | [`HttpProviderConfig`], the `[http_provider]` section |
//! | `backend.rs` | [`HttpBackend`], the [`Backend`](karu_engine::sdk::Backend) implementation |
//! | `request.rs` | URL normalisation and request building |
//! | `credential.rs` | the static bearer token and headers from path rules |
//!
//! The engine does everything else: the range header, response checks, retries, redirects
//! (followed only where safe: `Authorization` and configured headers never go to another
//! origin).
//!
//! It is built on the provider SDK, [`karu_engine::sdk`], only; its mock is the testkit's
//! `MockServer`, and `karu-testkit`'s conformance suite runs on it (and on a real nginx).
//!
//! ```
//! let mut registry = karu_engine::sdk::RegistryBuilder::new();
//! karu_provider_http::register(&mut registry);
//! let registry = registry.build()?;
//! let a = registry.resolve("HTTPS://Example.COM:443/data/./x/../a.bin#frag")?;
//! assert_eq!(a.canonical().as_str(), "https://example.com/data/a.bin");
//! assert_eq!(a.container(), Some("example.com"));
//! # Ok::<(), karu_engine::sdk::Error>(())
//! ```

mod backend;
mod config;
mod credential;
mod request;

use std::sync::Arc;

use karu_engine::sdk::{RegistryBuilder, Section};

pub use backend::HttpBackend;
pub use config::HttpProviderConfig;

/// The schemes this provider registers.
pub const SCHEMES: [&str; 2] = ["http", "https"];

/// The configuration section this provider reads (`[http_provider]`, and
/// `[paths."https://host/prefix".http_provider]`).
pub const SECTION: &str = "http_provider";

/// The `[http_provider]` section, declared by [`register`] so that a client checks it (and
/// its path-rule overrides) when it is built; its headers and token are secrets.
pub fn config_section() -> Section {
    Section::of::<HttpProviderConfig>(SECTION)
}

/// Register the plain HTTP provider: `http://` and `https://`, the `[http_provider]` section
/// (its static token and headers need no credential family).
pub fn register(registry: &mut RegistryBuilder) {
    let mut provider = registry.provider(Arc::new(HttpBackend::new()));
    provider.config_section(config_section());
    for scheme in SCHEMES {
        provider.scheme(scheme);
    }
}

/// This crate's README, whose examples are compiled (and run, where they need no network) as
/// documentation tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct Readme;
