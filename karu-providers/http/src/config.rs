//! The `[http_provider]` section: static headers, a bearer token, redirects.

use std::collections::BTreeMap;

use karu_engine::sdk::http::{HeaderName, HeaderValue};
use karu_engine::sdk::{InvalidKey, Key, SectionConfig, SectionKeys};
use serde::Deserialize;

/// Options of the plain HTTP provider, globally (`[http_provider]`) or for a URL prefix
/// (`[paths."https://host/prefix".http_provider]`).
///
/// | key | aliases | environment | meaning |
/// | --- | --- | --- | --- |
/// | `headers` | | | extra request headers, e.g. `{ "X-Api-Key" = "..." }` (default none) |
/// | `bearer_token` | `token` | | sent as `Authorization: Bearer …` (default none) |
/// | `follow_redirects` | | | follow 301/302/303/307/308, credentials never crossing origins (default `true`) |
///
/// Header values and the token are secrets: `Debug` shows only header names.
#[derive(Clone, Default, PartialEq, Eq, Deserialize, SectionKeys)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct HttpProviderConfig {
    /// Extra request headers.
    #[karu(secret)]
    pub headers: BTreeMap<String, String>,
    /// A bearer token for `Authorization`.
    #[serde(alias = "token")]
    #[karu(secret)]
    pub bearer_token: Option<String>,
    /// Whether to follow redirects (`None` = yes).
    pub follow_redirects: Option<bool>,
}

impl HttpProviderConfig {
    /// Whether redirects are followed.
    pub fn follows_redirects(&self) -> bool {
        self.follow_redirects.unwrap_or(true)
    }
}

impl SectionConfig for HttpProviderConfig {
    /// The keys of the table above, with their aliases and environment variables.
    fn keys() -> Vec<Key> {
        Key::table(include_str!("config.rs"))
    }

    /// Header names and values, and the token, must be able to travel in a request.
    fn check(&self) -> Result<(), InvalidKey> {
        for (name, value) in &self.headers {
            if HeaderName::from_bytes(name.as_bytes()).is_err() {
                return Err(InvalidKey::new(
                    format!("headers.{name}"),
                    "a header name of letters, digits and !#$%&'*+-.^_`|~",
                ));
            }
            if HeaderValue::from_str(value).is_err() {
                return Err(InvalidKey::new(
                    format!("headers.{name}"),
                    "a header value without control characters",
                ));
            }
        }
        if let Some(token) = &self.bearer_token
            && HeaderValue::from_str(&format!("Bearer {token}")).is_err()
        {
            return Err(InvalidKey::new(
                "bearer_token",
                "a token without control characters",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_and_tokens_that_cannot_travel_are_refused() {
        let config = |headers: &[(&str, &str)], token: Option<&str>| HttpProviderConfig {
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            bearer_token: token.map(str::to_string),
            follow_redirects: None,
        };
        assert_eq!(config(&[("X-Api-Key", "abc")], Some("t")).check(), Ok(()));
        let bad_name = config(&[("bad name", "v")], None).check().unwrap_err();
        assert_eq!(bad_name.key(), "headers.bad name");
        let bad_value = config(&[("X-Key", "a\nb")], None).check().unwrap_err();
        assert_eq!(bad_value.key(), "headers.X-Key");
        let bad_token = config(&[], Some("a\u{7f}")).check().unwrap_err();
        assert_eq!(bad_token.key(), "bearer_token");
    }

    #[test]
    fn debug_hides_secrets() {
        let c = HttpProviderConfig {
            headers: [("X-Api-Key".to_string(), "s3cr3t".to_string())].into(),
            bearer_token: Some("t0ken".to_string()),
            follow_redirects: None,
        };
        let d = format!("{c:?}");
        assert!(d.contains("X-Api-Key"));
        assert!(!d.contains("s3cr3t") && !d.contains("t0ken"), "{d}");
    }
}
