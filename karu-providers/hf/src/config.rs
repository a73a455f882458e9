//! The `[hf]` section, and the Hub's own environment names it honours.

use karu_engine::sdk::{
    InvalidKey, Key, SectionConfig, SectionKeys, Snapshot, check_endpoint, endpoint_problem,
};
use serde::Deserialize;

use crate::request::DEFAULT_ENDPOINT;

/// Options of the Hugging Face provider, globally (`[hf]`) or for a prefix
/// (`[paths."hf://datasets/org".hf]`). A key set here beats the Hub's environment variable.
///
/// | key | aliases | environment | meaning |
/// | --- | --- | --- | --- |
/// | `endpoint` | `hf_endpoint` | `HF_ENDPOINT` | the Hub (default `https://huggingface.co`), e.g. a mirror |
/// | `token` | `hf_token` | `HF_TOKEN`, `HUGGING_FACE_HUB_TOKEN`, the token file | the access token, sent as `Authorization: Bearer …` to the Hub only |
/// | `anonymous` | | | `true`: never send a token |
/// | `reuse_locations` | | | `false`: ask the resolve endpoint on every read (default `true`) |
///
/// Secrets never appear in `Debug`.
#[derive(Clone, Default, PartialEq, Eq, Deserialize, SectionKeys)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct HfConfig {
    /// The Hub endpoint.
    #[serde(alias = "hf_endpoint")]
    pub endpoint: Option<String>,
    /// The access token.
    #[serde(alias = "hf_token")]
    #[karu(secret, credential)]
    pub token: Option<String>,
    /// Never send a token.
    #[karu(credential)]
    pub anonymous: Option<bool>,
    /// Reuse a redirect's signed location for later reads of the same file and revision.
    pub reuse_locations: Option<bool>,
}

impl SectionConfig for HfConfig {
    /// The keys of the table above, with their aliases and environment variables.
    fn keys() -> Vec<Key> {
        Key::table(include_str!("config.rs"))
    }

    /// An endpoint that is not an http(s) URL a path can follow.
    fn check(&self) -> Result<(), InvalidKey> {
        match &self.endpoint {
            Some(endpoint) => check_endpoint("endpoint", endpoint, "https://huggingface.co"),
            None => Ok(()),
        }
    }
}

impl HfConfig {
    /// The endpoint: `endpoint`, else `HF_ENDPOINT` (as the Hub's clients read it), else the
    /// Hub. An `HF_ENDPOINT` that is not an http(s) URL a path can follow is an error naming it.
    pub(crate) fn endpoint(&self, snapshot: &Snapshot) -> Result<String, String> {
        if let Some(endpoint) = &self.endpoint {
            return Ok(endpoint.trim_end_matches('/').to_string());
        }
        match snapshot.env("HF_ENDPOINT").filter(|v| !v.is_empty()) {
            Some(endpoint) => match endpoint_problem(endpoint) {
                None => Ok(endpoint.trim_end_matches('/').to_string()),
                Some(problem) => Err(format!("HF_ENDPOINT {problem}")),
            },
            None => Ok(DEFAULT_ENDPOINT.to_string()),
        }
    }

    pub(crate) fn anonymous(&self) -> bool {
        self.anonymous.unwrap_or(false)
    }

    pub(crate) fn reuse_locations(&self) -> bool {
        self.reuse_locations.unwrap_or(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use karu_engine::sdk::ConfigBuilder;

    fn snapshot(env: &[(&str, &str)]) -> Snapshot {
        ConfigBuilder::new()
            .user_file(None)
            .project_file(None)
            .environment(env.iter().map(|(k, v)| (k.to_string(), v.to_string())))
            .build()
            .unwrap()
    }

    #[test]
    fn the_endpoint_is_the_key_then_hf_endpoint_then_the_hub() {
        let config = HfConfig::default();
        assert_eq!(
            config.endpoint(&snapshot(&[])).unwrap(),
            "https://huggingface.co"
        );
        let mirror = snapshot(&[("HF_ENDPOINT", "https://hf-mirror.example/")]);
        assert_eq!(
            config.endpoint(&mirror).unwrap(),
            "https://hf-mirror.example"
        );
        let set = HfConfig {
            endpoint: Some("http://127.0.0.1:9/".into()),
            ..HfConfig::default()
        };
        assert_eq!(set.endpoint(&mirror).unwrap(), "http://127.0.0.1:9");
        assert!(
            config
                .endpoint(&snapshot(&[("HF_ENDPOINT", "ftp://x")]))
                .is_err()
        );
        assert!(config.endpoint(&snapshot(&[("HF_ENDPOINT", "")])).is_ok());
    }

    #[test]
    fn check_refuses_bad_endpoints_and_debug_hides_the_token() {
        for bad in [
            "huggingface.co",
            "ftp://h",
            "https://u:p@h",
            "https://h/?x=1",
        ] {
            let config = HfConfig {
                endpoint: Some(bad.into()),
                ..HfConfig::default()
            };
            assert!(config.check().is_err(), "{bad}");
        }
        let config = HfConfig {
            token: Some("hf_SECRET".into()),
            ..HfConfig::default()
        };
        assert!(config.check().is_ok());
        assert!(!format!("{config:?}").contains("SECRET"));
    }
}
