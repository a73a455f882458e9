//! The `[source]` section.

use karu_engine::sdk::{InvalidKey, Key, SectionConfig, SectionKeys, check_endpoint};
use serde::Deserialize;

use crate::request::DEFAULT_ENDPOINT;

/// Options of the Source Cooperative provider, globally (`[source]`) or for a prefix
/// (`[paths."source://account/product".source]`). Reads are anonymous (public data) unless a
/// credential source is set here or an application's callback for the `source` family
/// answers.
///
/// | key | aliases | environment | meaning |
/// | --- | --- | --- | --- |
/// | `endpoint` | `endpoint_url` | | the data proxy (default `https://data.source.coop`) |
/// | `region` | | | the region requests are signed for (default `us-east-1`) |
/// | `profile` | | | a profile of the AWS config files set up for Source (`credential_process = source-coop creds`) |
/// | `credential_process` | | | a command printing credentials (JSON), as in a profile |
/// | `access_key_id` | `aws_access_key_id` | | an API key issued by Source: its id |
/// | `secret_access_key` | `aws_secret_access_key` | | the API key's secret |
/// | `session_token` | `aws_session_token` | | a temporary key's session token |
/// | `anonymous` | | | `true`: never sign, whatever else is set |
///
/// These credentials are Source's own scope: the S3 provider's keys, profiles and `AWS_*`
/// environment credentials are never used for Source. Secrets never appear in `Debug`.
#[derive(Clone, Default, PartialEq, Eq, Deserialize, SectionKeys)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct SourceConfig {
    /// The data proxy.
    #[serde(alias = "endpoint_url")]
    pub endpoint: Option<String>,
    /// The region to sign for.
    pub region: Option<String>,
    /// A profile of the AWS config files.
    #[karu(credential)]
    pub profile: Option<String>,
    /// A command printing credentials.
    #[karu(secret, credential)]
    pub credential_process: Option<String>,
    /// An API key's id.
    #[serde(alias = "aws_access_key_id")]
    #[karu(credential)]
    pub access_key_id: Option<String>,
    /// An API key's secret.
    #[serde(alias = "aws_secret_access_key")]
    #[karu(secret, credential)]
    pub secret_access_key: Option<String>,
    /// A temporary key's session token.
    #[serde(alias = "aws_session_token")]
    #[karu(secret, credential)]
    pub session_token: Option<String>,
    /// Never sign.
    #[karu(credential)]
    pub anonymous: Option<bool>,
}

impl SectionConfig for SourceConfig {
    /// The keys of the table above, with their aliases and environment variables.
    fn keys() -> Vec<Key> {
        Key::table(include_str!("config.rs"))
    }

    fn check(&self) -> Result<(), InvalidKey> {
        if let Some(endpoint) = &self.endpoint {
            check_endpoint("endpoint", endpoint, "https://data.source.coop")?;
        }
        InvalidKey::unless_together(
            (
                ("access_key_id", "an access key id"),
                self.access_key_id.is_some(),
            ),
            (
                ("secret_access_key", "a secret key"),
                self.secret_access_key.is_some(),
            ),
        )
    }
}

impl SourceConfig {
    pub(crate) fn endpoint(&self) -> &str {
        self.endpoint
            .as_deref()
            .unwrap_or(DEFAULT_ENDPOINT)
            .trim_end_matches('/')
    }

    pub(crate) fn region(&self) -> &str {
        self.region.as_deref().unwrap_or("us-east-1")
    }

    /// Whether any credential source is set (else reads are anonymous, unless a callback
    /// answers).
    pub(crate) fn signs(&self) -> bool {
        !self.anonymous.unwrap_or(false)
            && (self.profile.is_some()
                || self.credential_process.is_some()
                || self.access_key_id.is_some())
    }

    pub(crate) fn keys(&self) -> Option<(String, String, Option<String>)> {
        match (&self.access_key_id, &self.secret_access_key) {
            (Some(id), Some(secret)) => {
                Some((id.clone(), secret.clone(), self.session_token.clone()))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_checks_and_debug() {
        let config = SourceConfig::default();
        assert_eq!(config.endpoint(), "https://data.source.coop");
        assert_eq!(config.region(), "us-east-1");
        assert!(!config.signs());
        let half = SourceConfig {
            access_key_id: Some("AK".into()),
            ..SourceConfig::default()
        };
        assert!(half.check().is_err());
        let keyed = SourceConfig {
            secret_access_key: Some("SECRET".into()),
            ..half
        };
        assert!(keyed.check().is_ok() && keyed.signs());
        assert!(!format!("{keyed:?}").contains("SECRET"));
        let off = SourceConfig {
            anonymous: Some(true),
            ..keyed
        };
        assert!(!off.signs());
        for bad in ["data.source.coop", "ftp://x", "https://h/?a=1"] {
            let c = SourceConfig {
                endpoint: Some(bad.into()),
                ..SourceConfig::default()
            };
            assert!(c.check().is_err(), "{bad}");
        }
    }
}
