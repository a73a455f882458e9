//! A toy provider, the example of `karu-providers/README.md`: `toy://host:port/key` read over
//! plain HTTP from `http://host:port/key`, authenticated with a bearer token from its own
//! `[toy]` configuration section, or from an application's credential callback for the `toy`
//! family. It uses only the provider SDK, [`karu_engine::sdk`].
//!
//! ```
//! let client = karu::Client::builder()
//!     .user_config_file(None)
//!     .project_config_file(None)
//!     .provider(karu_provider_example::register)
//!     .set("toy.token", "t0ken")
//!     .build()?;
//! let object = client.locate("toy://127.0.0.1:8080/data/a.bin")?;
//! assert_eq!(object.canonical().as_str(), "toy://127.0.0.1:8080/data/a.bin");
//! # Ok::<(), karu::Error>(())
//! ```

/// The Rust examples of the provider guide (`karu-providers/README.md`), compiled as
/// documentation tests.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ProviderGuide;

mod backend;
mod config;
mod credential;
mod request;

use std::sync::Arc;

use karu_engine::sdk::{RegistryBuilder, Section};

pub use backend::ToyBackend;
pub use config::ToyConfig;
pub use credential::credential;

/// The URI schemes this provider registers.
pub const SCHEMES: [&str; 1] = ["toy"];

/// The configuration section (`[toy]`, `[paths."toy://host/prefix".toy]`).
pub const SECTION: &str = "toy";

/// The credential family (for application callbacks).
pub const FAMILY: &str = "toy";

/// The `[toy]` section, declared by [`register`] so that a client checks it (and its
/// path-rule overrides) when it is built; its secret keys are redacted.
pub fn config_section() -> Section {
    Section::of::<ToyConfig>(SECTION)
}

/// Register the toy provider: its scheme, credential family and configuration section.
pub fn register(registry: &mut RegistryBuilder) {
    registry
        .provider(Arc::new(ToyBackend::default()))
        .scheme(SCHEMES[0])
        .credential_family(FAMILY)
        .config_section(config_section());
}
