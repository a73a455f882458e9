//! Karu's own providers in this build: which are enabled, and what an application calls of
//! them. Each provider's module has its `register` function (what
//! [`ClientBuilder::provider`](crate::ClientBuilder::provider) takes, for a registry built by
//! hand: [`Registry::builder`](crate::Registry::builder)), its credential `FAMILY` (the name a
//! [`ClientBuilder::credential_callback`](crate::ClientBuilder::credential_callback) is
//! registered under) and the constructors of the credential values a callback of that family
//! may return besides a [`BearerToken`](crate::BearerToken). How a provider builds and signs
//! its requests is its own business: its backend, configuration types and helpers are not
//! part of `karu`'s API (a provider author reads them in the provider crates).
//!
//! ```
//! use std::time::{Duration, SystemTime};
//!
//! # #[cfg(feature = "s3")] {
//! let expires = SystemTime::now() + Duration::from_secs(900);
//! let client = karu::Client::builder()
//!     .user_config_file(None)
//!     .project_config_file(None)
//!     .credential_callback(karu::providers::s3::FAMILY, move |_path: &karu::CanonicalPath| {
//!         let keys = karu::providers::s3::credential("AKIAEXAMPLE", "secret", None, Some(expires));
//!         Ok(karu::CallbackCredential::for_prefix(keys, "s3://bucket"))
//!     })
//!     .build()?;
//! # let _ = client;
//! # }
//! assert!(karu::providers::enabled().contains(&"local"));
//! # Ok::<(), karu::Error>(())
//! ```

pub use karu_providers::{enabled, register_all};

/// The credential families of Karu's providers whose callbacks return a
/// [`BearerToken`](crate::BearerToken): `"gcp"` (Google Cloud Storage), `"azure"` (Azure Blob
/// and Data Lake Storage), `"hf"` (Hugging Face). Faces that take a callback's answer in
/// their own terms (C, Python) refuse a key pair for these, naming the family.
pub const BEARER_FAMILIES: [&str; 3] = ["gcp", "azure", "hf"];

/// The credential families of Karu's providers whose callbacks return an S3 key pair
/// ([`s3::credential`]): `"aws"` (S3 and S3-compatible stores) and `"source"` (Source
/// Cooperative). Faces refuse a bearer token for these.
pub const AWS_KEY_FAMILIES: [&str; 2] = ["aws", "source"];

#[cfg(feature = "local")]
pub mod local {
    //! Local files: plain paths and `file://` URIs.

    pub use karu_providers::local::register;
}

#[cfg(feature = "http")]
pub mod http {
    //! Plain HTTP(S): any server that honours `Range`.

    pub use karu_providers::http::register;
}

#[cfg(feature = "s3")]
pub mod s3 {
    //! Amazon S3 and S3-compatible stores (family `"aws"`: [`credential`] makes a key pair).

    pub use karu_providers::s3::{FAMILY, credential, register};
}

#[cfg(feature = "gcs")]
pub mod gcs {
    //! Google Cloud Storage (family `"gcp"`: a [`BearerToken`](crate::BearerToken), or
    //! [`hmac_credential`] for an HMAC key).

    pub use karu_providers::gcs::{FAMILY, hmac_credential, register};
}

#[cfg(feature = "azure")]
pub mod azure {
    //! Azure Blob Storage and Data Lake Storage (family `"azure"`: a
    //! [`BearerToken`](crate::BearerToken), [`sas_credential`] or [`shared_key_credential`]).

    pub use karu_providers::azure::{FAMILY, register, sas_credential, shared_key_credential};
}

#[cfg(feature = "hf")]
pub mod hf {
    //! The Hugging Face Hub (family `"hf"`: a [`BearerToken`](crate::BearerToken)).

    pub use karu_providers::hf::{FAMILY, register};
}

#[cfg(feature = "source")]
pub mod source {
    //! Source Cooperative (family `"source"`: an S3 key pair, made with `s3::credential`).

    pub use karu_providers::source::{FAMILY, register};
}
