//! The `[toy]` section.

use std::fmt;

use karu_engine::sdk::SectionConfig;
use serde::Deserialize;

/// Options of the toy provider, globally (`[toy]`) or for a prefix
/// (`[paths."toy://host/prefix".toy]`): `token` (alias `bearer_token`), sent as
/// `Authorization: Bearer …`. Secret: `Debug` never shows it.
#[derive(Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct ToyConfig {
    /// The bearer token.
    #[serde(alias = "bearer_token")]
    pub token: Option<String>,
}

/// The keys that choose the credential (its scope is keyed on where they were set); secrets.
pub(crate) const CREDENTIAL_KEYS: [&str; 2] = ["token", "bearer_token"];

impl SectionConfig for ToyConfig {
    fn secret_keys() -> &'static [&'static str] {
        &CREDENTIAL_KEYS
    }
}

impl fmt::Debug for ToyConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let token = self.token.as_ref().map(|_| "<redacted>");
        f.debug_struct("ToyConfig")
            .field("token", &token)
            .finish_non_exhaustive()
    }
}
