//! Karu's local-file provider: plain paths and `file://` URIs.
//!
//! Resolution makes a path absolute and normalises it lexically (`.` and `..` segments,
//! repeated separators) without touching the filesystem, so a missing file fails on its own
//! read with `Status::NotFound` rather than at resolution. The engine's file workers do the
//! reading (positional reads straight into destinations); this crate only says which file an
//! address means. Local reads are never merged and take no credentials, so this provider has
//! no `config`, `request` or `credential` room.
//!
//! ```
//! let registry = karu_engine::Registry::new();
//! karu_provider_local::register(&registry);
//! let a = registry.resolve("/data/./x/../tensors.bin")?;
//! let b = registry.resolve("file:///data/tensors.bin")?;
//! assert_eq!(a.canonical(), b.canonical());
//! assert_eq!(a.canonical().as_str(), "/data/tensors.bin");
//! # Ok::<(), karu_engine::Error>(())
//! ```

mod backend;

use std::sync::Arc;

pub use backend::LocalBackend;

/// The URI scheme this provider registers. Plain paths (no scheme) also resolve through it.
pub const SCHEME: &str = "file";

/// Register the local provider for `file://` URIs and plain paths.
pub fn register(registry: &karu_engine::Registry) {
    registry.register(SCHEME, Arc::new(LocalBackend::new()));
}
