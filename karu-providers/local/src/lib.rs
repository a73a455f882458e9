//! Karu's local-file provider: plain paths and `file://` URIs.
//!
//! Resolution makes a path absolute (relative paths against the current directory read when
//! the backend was made) and drops only what cannot change which file the operating system
//! opens: repeated separators and `.` segments. `..` segments stay in the path and in its
//! canonical identity, because only the filesystem knows what they mean: with
//! `blink -> a/b`, `blink/../x` is `a/x`, and `missing/../x` does not exist. Resolution does
//! not touch the filesystem, so a missing file fails on its own read with
//! `Status::NotFound` rather than at resolution. The engine's file workers do the
//! reading (positional reads straight into destinations); this crate only says which file an
//! address means. Local reads are never merged and take no credentials, so this provider has
//! no `config`, `request` or `credential` file.
//!
//! ```
//! let mut registry = karu_engine::sdk::RegistryBuilder::new();
//! karu_provider_local::register(&mut registry);
//! let registry = registry.build()?;
//! let a = registry.resolve("/data/.//tensors.bin")?;
//! let b = registry.resolve("file:///data/tensors.bin")?;
//! assert_eq!(a.canonical(), b.canonical());
//! assert_eq!(a.canonical().as_str(), "/data/tensors.bin");
//! // `x` may be a symbolic link: `..` is the filesystem's to resolve, at open.
//! let c = registry.resolve("/data/x/../tensors.bin")?;
//! assert_eq!(c.canonical().as_str(), "/data/x/../tensors.bin");
//! # Ok::<(), karu_engine::sdk::Error>(())
//! ```

mod backend;

use std::sync::Arc;

use karu_engine::sdk::RegistryBuilder;

pub use backend::LocalBackend;

/// The URI schemes this provider registers.
pub const SCHEMES: [&str; 1] = ["file"];

/// Register the local provider for `file://` URIs and plain paths (no credential family, no
/// configuration section).
pub fn register(registry: &mut RegistryBuilder) {
    let mut provider = registry.provider(Arc::new(LocalBackend::new()));
    for scheme in SCHEMES {
        provider.scheme(scheme);
    }
}

/// This crate's README, whose examples are compiled (and run, where they need no network) as
/// documentation tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct Readme;
