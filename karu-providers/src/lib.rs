//! Registers Karu's providers: one cargo feature per provider, all on by default.
//!
//! | feature | crate | addresses |
//! | --- | --- | --- |
//! | `local` | `karu-provider-local` | plain paths, `file://` |
//! | `http` | `karu-provider-http` | `http://`, `https://` |
//! | `s3` | `karu-provider-s3` | `s3://`, `https://*.amazonaws.com/` |
//!
//! Registration is explicit (no link-time initialisers): [`register_all`] calls each enabled
//! provider's own `register`. A third-party provider registers itself the same way.
//!
//! ```
//! let registry = karu_engine::Registry::new();
//! karu_providers::register_all(&registry);
//! assert!(registry.resolve("/tmp/x.bin").is_ok());
//! ```

#[cfg(feature = "http")]
pub use karu_provider_http as http;
#[cfg(feature = "local")]
pub use karu_provider_local as local;
#[cfg(feature = "s3")]
pub use karu_provider_s3 as s3;

/// Register every provider enabled by this crate's features.
pub fn register_all(registry: &karu_engine::Registry) {
    #[cfg(feature = "local")]
    karu_provider_local::register(registry);
    #[cfg(feature = "http")]
    karu_provider_http::register(registry);
    #[cfg(feature = "s3")]
    karu_provider_s3::register(registry);
    let _ = registry;
}

/// The configuration sections of the providers enabled by this crate's features (`[s3]`,
/// `[http_provider]`), to declare to the configuration builder so that a client checks them
/// when it is built.
pub fn config_sections() -> Vec<karu_config::Section> {
    vec![
        #[cfg(feature = "http")]
        karu_provider_http::config_section(),
        #[cfg(feature = "s3")]
        karu_provider_s3::config_section(),
    ]
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
    ]
}
