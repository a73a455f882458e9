//! Configuration as a provider reads it: its own section for an object (path rules applied),
//! the credential scope those options draw, and the files a user names for keys and tokens.

use std::sync::Arc;

use karu_config::{Scoped, Snapshot, read_regular_text};
use serde::de::DeserializeOwned;

use crate::sdk::credential::CredentialScope;
use crate::sdk::locator::Locator;
use crate::sdk::status::{Error, Status};

/// The largest key, token or certificate file a provider reads (with [`read_regular_file`](crate::sdk::read_regular_file)):
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

/// A provider's settings in effect for the object `locator` names: its [`section`] `name`,
/// resolved by `resolve` (which reads the provider's own variables from the snapshot). What
/// `resolve` refuses is an [`Status::InvalidArgument`] error: "`what` configuration for
/// `object`: why".
pub fn resolved_section<T, R>(
    snapshot: &Snapshot,
    locator: &Locator,
    name: &str,
    what: &str,
    resolve: impl FnOnce(&T, &Snapshot) -> Result<R, String>,
) -> Result<R, Error>
where
    T: DeserializeOwned + Send + Sync + 'static,
{
    let config = section::<T>(snapshot, locator, name)?;
    resolve(&config.value, snapshot).map_err(|why| {
        Error::new(
            Status::InvalidArgument,
            format!("{what} configuration for {}: {why}", locator.canonical()),
        )
    })
}

/// The credential scope of the object `locator` names for a provider of `family` whose section
/// `section` chooses the credential with `keys` (every alias included): two objects share a
/// credential only when the same layers and path rules set those keys for both (the
/// native scope of Karu's contract, `karu-engine/README.md`, "Credentials and scopes"). A backend's
/// [`credential_source`](crate::sdk::Backend::credential_source) starts here.
///
/// ```
/// use karu_engine::sdk::{ConfigBuilder, Section, SectionConfig, SectionKeys, credential_scope};
///
/// #[derive(serde::Deserialize, SectionKeys)]
/// struct Toy {
///     #[karu(secret, credential)]
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
/// let registry = karu_engine::sdk::testing::registry();
/// let scope = |path: &str| {
///     let locator = registry.resolve(path).unwrap();
///     credential_scope("toy", &snapshot, &locator, "toy", Toy::CREDENTIAL).unwrap()
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
