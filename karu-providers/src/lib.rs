//! Registers Karu's providers: one cargo feature per provider, all on by default.
//!
//! | feature | crate | addresses |
//! | --- | --- | --- |
//! | `local` | `karu-provider-local` | plain paths, `file://` |
//! | `http` | `karu-provider-http` | `http://`, `https://` |
//! | `s3` | `karu-provider-s3` | `s3://`, `https://*.amazonaws.com/` |
//! | `hf` | `karu-provider-hf` | `hf://`, `https://huggingface.co/`, `https://hf.co/` |
//! | `source` | `karu-provider-source` | `source://`, `https://data.source.coop/` |
//! | `azure` | `karu-provider-azure` | `az://`, `azure://`, `abfs[s]://`, `https://*.blob.core.windows.net/`, `https://*.dfs.core.windows.net/` |
//! | `gcs` | `karu-provider-gcs` | `gs://`, `https://storage.googleapis.com/`, `https://*.storage.googleapis.com/`, `https://storage.cloud.google.com/` |
//!
//! Registration is explicit (no link-time initialisers): [`register_all`] calls each enabled
//! provider's own `register`. A third-party provider registers itself the same way
//! (`karu::ClientBuilder::provider(my_provider::register)`); `README.md` in this directory is
//! the guide to writing one.
//!
//! ```
//! let mut registry = karu_engine::sdk::RegistryBuilder::new();
//! karu_providers::register_all(&mut registry);
//! assert!(registry.build()?.resolve("/tmp/x.bin").is_ok());
//! # Ok::<(), karu_engine::sdk::Error>(())
//! ```

#[cfg(feature = "azure")]
pub use karu_provider_azure as azure;
#[cfg(feature = "gcs")]
pub use karu_provider_gcs as gcs;
#[cfg(feature = "hf")]
pub use karu_provider_hf as hf;
#[cfg(feature = "http")]
pub use karu_provider_http as http;
#[cfg(feature = "local")]
pub use karu_provider_local as local;
#[cfg(feature = "s3")]
pub use karu_provider_s3 as s3;
#[cfg(feature = "source")]
pub use karu_provider_source as source;

/// Register every provider enabled by this crate's features.
pub fn register_all(registry: &mut karu_engine::sdk::RegistryBuilder) {
    #[cfg(feature = "local")]
    karu_provider_local::register(registry);
    #[cfg(feature = "http")]
    karu_provider_http::register(registry);
    #[cfg(feature = "s3")]
    karu_provider_s3::register(registry);
    #[cfg(feature = "hf")]
    karu_provider_hf::register(registry);
    #[cfg(feature = "source")]
    karu_provider_source::register(registry);
    #[cfg(feature = "azure")]
    karu_provider_azure::register(registry);
    #[cfg(feature = "gcs")]
    karu_provider_gcs::register(registry);
    let _ = registry;
}

/// The providers enabled in this build, by name.
pub fn enabled() -> &'static [&'static str] {
    &[
        #[cfg(feature = "local")]
        "local",
        #[cfg(feature = "http")]
        "http",
        #[cfg(feature = "s3")]
        "s3",
        #[cfg(feature = "hf")]
        "hf",
        #[cfg(feature = "source")]
        "source",
        #[cfg(feature = "azure")]
        "azure",
        #[cfg(feature = "gcs")]
        "gcs",
    ]
}
