//! Karu's Hugging Face provider: files of models, datasets and Spaces on the Hugging Face Hub.
//!
//! The files of every provider crate:
//!
//! | file | what it holds |
//! | --- | --- |
//! | `lib.rs` | this overview, [`SCHEMES`], [`PATTERNS`], [`SECTION`], [`FAMILY`], [`config_section`], [`register`] |
//! | `config.rs` | [`HfConfig`], the `[hf]` section and the `HF_ENDPOINT` it honours |
//! | `backend.rs` | [`HfBackend`], the [`Backend`](karu_engine::sdk::Backend) implementation |
//! | `request.rs` | addresses, resolve URLs, signed locations' lifetimes, error hints |
//! | `credential.rs` | the token lookup in the Hub's documented order |
//!
//! ## Addresses
//!
//! `hf://[datasets/|spaces/]org/repo[@revision]/path/in/repo` (models without a prefix), and
//! the `https://huggingface.co/[datasets/|spaces/]org/repo/resolve/REVISION/path` URLs users
//! paste (`/blob/` too, and `https://hf.co/`). Every spelling resolves to one canonical path
//! that names the revision (default `main`): `hf://datasets/org/repo@main/path`. A revision
//! holding `/` is written percent-encoded (`@refs%2Fpr%2F1`), or, for the Hub's special
//! references `refs/pr/N` and `refs/convert/NAME`, as it is; it is sent as one encoded path
//! segment, as the Hub expects. The path in an `hf://` address is literal; in a pasted URL it
//! is percent-decoded. Repositories are named `org/repo`.
//!
//! ## Requests
//!
//! Each read is a ranged `GET` of `{endpoint}/{repo}/resolve/{revision}/{path}` (endpoint:
//! `hf.endpoint`, else `HF_ENDPOINT`, else `https://huggingface.co`) with the token as a bearer
//! token. The Hub redirects to a CDN or storage bridge on another origin with a signed URL;
//! the engine follows it without `Authorization`, with the same `Range`, and checks the final
//! answer as always (size and ETag come from it). That location is reused for later reads of
//! the same file and revision until its signature expires (the engine's location cache; this
//! provider reads the expiry from the signed URL); a `403` or `404` from a reused location
//! sends the read back to the resolve endpoint once. `hf.reuse_locations = false` turns the
//! reuse off.
//!
//! ## Token
//!
//! See `credential.rs`: an application's callback for the `hf` family, then `hf.token`, then
//! `HF_TOKEN`, `HUGGING_FACE_HUB_TOKEN`, then the CLI's token file (`HF_TOKEN_PATH`,
//! `$HF_HOME/token`, the default cache location); anonymous when none is found. A gated or
//! private repository read without a token fails with `PermissionDenied` and a message saying
//! a token is needed.
//!
//! ```
//! let mut registry = karu_engine::sdk::RegistryBuilder::new();
//! karu_provider_hf::register(&mut registry);
//! let registry = registry.build()?;
//! let a = registry.resolve("hf://datasets/org/data/train/0.parquet")?;
//! let b = registry.resolve("https://huggingface.co/datasets/org/data/resolve/main/train/0.parquet")?;
//! assert_eq!(a.canonical(), b.canonical());
//! assert_eq!(a.canonical().as_str(), "hf://datasets/org/data@main/train/0.parquet");
//! let pr = registry.resolve("hf://org/model@refs/pr/1/model.safetensors")?;
//! assert_eq!(pr.canonical().as_str(), "hf://org/model@refs%2Fpr%2F1/model.safetensors");
//! # Ok::<(), karu_engine::sdk::Error>(())
//! ```

mod backend;
mod config;
mod credential;
mod request;

use std::sync::Arc;

use karu_engine::sdk::{RegistryBuilder, Section};

pub use backend::HfBackend;
pub use config::HfConfig;
pub use credential::credential;

/// The URI schemes this provider registers.
pub const SCHEMES: [&str; 1] = ["hf"];

/// The Hub URL prefixes registered besides the scheme (the URLs users paste).
pub const PATTERNS: [&str; 2] = ["https://huggingface.co/", "https://hf.co/"];

/// The configuration section (`[hf]`, `[paths."hf://org/repo".hf]`).
pub const SECTION: &str = "hf";

/// The credential family (for application callbacks).
pub const FAMILY: &str = "hf";

/// The `[hf]` section, declared by [`register`] so that a client checks it (and its
/// path-rule overrides) when it is built; its secret keys are redacted.
pub fn config_section() -> Section {
    Section::of::<HfConfig>(SECTION)
}

/// Register the Hugging Face provider: `hf://` and Hub URLs, the `hf` credential family, the
/// `[hf]` section.
pub fn register(registry: &mut RegistryBuilder) {
    let mut provider = registry.provider(Arc::new(HfBackend::new()));
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
