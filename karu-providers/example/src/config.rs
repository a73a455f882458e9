//! The `[toy]` section.

use karu_engine::sdk::{SectionConfig, SectionKeys};
use serde::Deserialize;

/// Options of the toy provider, globally (`[toy]`) or for a prefix
/// (`[paths."toy://host/prefix".toy]`): `token` (alias `bearer_token`), sent as
/// `Authorization: Bearer …`. Secret: `Debug` never shows it.
#[derive(Clone, Default, PartialEq, Eq, Deserialize, SectionKeys)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct ToyConfig {
    /// The bearer token.
    #[serde(alias = "bearer_token")]
    #[karu(secret, credential)]
    pub token: Option<String>,
}

impl SectionConfig for ToyConfig {}
