//! The provider SDK: everything a provider crate needs, and the helpers every cloud provider
//! shares. A provider crate depends on `karu-engine` and imports from this module only (not
//! from the rest of the engine, not from `karu-config`, never from the `karu` facade).
//!
//! A provider is a [`Backend`]: it [resolves](Backend::resolve) addresses into
//! [`Resolved`] objects (no network, no credentials) and, for remote objects,
//! [prepares](Backend::prepare) the request of each attempt from a [`PrepareContext`] (the
//! object, the [`RangeSpec`], the configuration [`Snapshot`], the [`Credential`]) into a
//! [`PreparedRequest`], which the engine sends, checks, retries and resumes. Optional hooks:
//! [`credential_source`](Backend::credential_source) (a [`CredentialScope`] and the
//! [`CredentialProvider`] that looks credentials up on a credential worker),
//! [`capabilities`](Backend::capabilities) ([`Capabilities`]),
//! [`correction`](Backend::correction) (an [`ErrorResponse`] asking for a [`Correction`]) and
//! [`transformed`](Backend::transformed).
//!
//! A provider crate exports one `register` function that declares the provider to a
//! [`RegistryBuilder`]: its backend, the schemes and prefixes it serves, its credential family
//! and its configuration section. An application adds it in one line,
//! `karu::Client::builder().provider(my_provider::register)`; Karu's own providers are
//! registered the same way, by cargo feature.
//!
//! The shared helpers:
//!
//! - [`bridge`]: run an asynchronous credential SDK (aws-config, gcp_auth, azure_identity) from
//!   a credential lookup, on one shared small runtime, bounded by the read's deadline, its
//!   errors formatted without secrets;
//! - [`PerScope`]: one credential provider per credential scope (an SDK chain built once per
//!   scope, in each process);
//! - [`PerProcess`]: a value of the process that made it, made again in a forked child (what a
//!   backend keeps that a fork must not share: learned state behind a lock, clients holding
//!   connections);
//! - [`encode_path`]: an object name as it goes into a request URL's path, encoded as every
//!   provider's requests encode it;
//! - [`check_endpoint`]: what a configured endpoint may be, the same for every provider, and
//!   how a refused one is quoted (redacted);
//! - [`system_time_after`]: an expiry a server announces, however far away, without overflow;
//! - [`read_regular_file`]: a key, token or certificate file a user names, read so that no
//!   path (a FIFO, `/dev/zero`) can hang a credential worker or fill memory;
//! - [`redact`]: what of an address, URL, text or error chain may be shown;
//! - [`error_body`]: the code and message of XML and JSON error answers, and summaries.
//!
//! `karu-providers/README.md` is the guide to writing a provider crate; the toy provider in
//! `karu-providers/example` is a complete one in under 150 lines.

pub mod bridge;
mod endpoint;
pub mod error_body;
mod html;
mod path;
pub mod redact;
mod scopes;

use std::sync::Arc;

use serde::de::DeserializeOwned;

pub use crate::after::{FOREVER, system_time_after};
pub use crate::backend::{Backend, Registration, Registry, RegistryBuilder, scheme_of};
pub use crate::credential::{
    CallbackCredential, Credential, CredentialCallback, CredentialProvider, CredentialScope,
    CredentialSource, FetchContext,
};
pub use crate::http::check::RangeSpec;
pub use crate::http::request::{
    Capabilities, Correction, ErrorResponse, HttpOptions, PrepareContext, PreparedRequest,
};
pub use crate::locator::{CanonicalPath, Locator, Resolved, Target, Window};
pub use crate::process::{PerProcess, ProcessStamp};
pub use crate::status::{Error, Status};
pub use endpoint::{check_endpoint, endpoint_problem, shown_endpoint};
pub use karu_config::{
    ConfigBuilder, ConfigError, ConfigErrorKind, InvalidKey, Key, Origin, Scoped, Section,
    SectionConfig, Snapshot, read_regular_file, read_regular_text,
};
pub use path::{PATH_KEEPS, encode_path};
pub use scopes::PerScope;

/// The `http` crate of [`PreparedRequest`]'s URL and headers, so a provider names the same
/// version the engine sends.
pub use ::http;

/// The largest key, token or certificate file a provider reads (with [`read_regular_file`]):
/// 1 MiB, far more than any holds.
pub const CREDENTIAL_FILE_MAX: u64 = 1 << 20;

/// [`read_regular_text`] of a credential file (see [`CREDENTIAL_FILE_MAX`]).
pub fn read_credential_file(path: &std::path::Path) -> std::io::Result<String> {
    read_regular_text(path, CREDENTIAL_FILE_MAX)
}

/// A provider's configuration section `name` (`[name]`, `KARU_NAME__KEY`, and the path rules'
/// `[paths."prefix".name]`) for the object `locator` names, deserialized into the provider's
/// serde type `T` (which should be `#[serde(default)]`), with the origins of its values.
/// Cached: every object under the same path rules shares one value.
///
/// A value that does not deserialize is an [`Status::InvalidArgument`] error naming the layer
/// and the key.
pub fn section<T>(
    snapshot: &Snapshot,
    locator: &Locator,
    name: &str,
) -> Result<Arc<Scoped<T>>, Error>
where
    T: DeserializeOwned + Send + Sync + 'static,
{
    snapshot
        .section_shared::<T>(locator.canonical().as_str(), name)
        .map_err(|e| Error::new(Status::InvalidArgument, e.to_string()))
}

/// The credential scope of the object `locator` names for a provider of `family` whose section
/// `section` chooses the credential with `keys` (every alias included): two objects share a
/// credential only when the same layers and path rules set those keys for both (the
/// specification's native scope). A backend's
/// [`credential_source`](Backend::credential_source) starts here.
///
/// ```
/// use karu_engine::provider::{ConfigBuilder, Section, SectionConfig, credential_scope};
///
/// #[derive(serde::Deserialize)]
/// struct Toy {
///     token: Option<String>,
/// }
/// impl SectionConfig for Toy {}
///
/// let snapshot = ConfigBuilder::new()
///     .user_file(None)
///     .project_file(None)
///     .section(Section::of::<Toy>("toy"))
///     .path_set("/data/private", "toy.token", "t")
///     .build()?;
/// let registry = karu_engine::testing::registry();
/// let scope = |path: &str| {
///     let locator = registry.resolve(path).unwrap();
///     credential_scope("toy", &snapshot, &locator, "toy", &["token"]).unwrap()
/// };
/// assert_eq!(scope("/data/a"), scope("/other/b"));
/// assert_ne!(scope("/data/a"), scope("/data/private/b"));
/// assert_eq!(scope("/data/a").family(), "toy");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn credential_scope(
    family: &str,
    snapshot: &Snapshot,
    locator: &Locator,
    section: &str,
    keys: &[&str],
) -> Result<CredentialScope, Error> {
    let origins = snapshot
        .key_origins(locator.canonical().as_str(), section, keys)
        .map_err(|e| Error::new(Status::InvalidArgument, e.to_string()))?;
    Ok(CredentialScope::new(family, origins.to_vec()))
}
