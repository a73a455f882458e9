//! The static credentials of plain HTTP: a bearer token and headers from configuration.
//!
//! Plain HTTP needs no credential worker: the token comes from the immutable configuration
//! snapshot, so these transfers join the HTTP queue directly.

use karu_engine::sdk::http::HeaderMap;
use karu_engine::sdk::http::header::{AUTHORIZATION, HeaderName, HeaderValue};
use karu_engine::sdk::{Error, Status};

use crate::config::HttpProviderConfig;

/// Add the configured headers and bearer token; return the names that must not follow a
/// redirect to another origin.
pub(crate) fn apply(
    config: &HttpProviderConfig,
    headers: &mut HeaderMap,
) -> Result<Vec<HeaderName>, Error> {
    let mut sensitive = Vec::new();
    for (name, value) in &config.headers {
        let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
            Error::new(
                Status::InvalidArgument,
                format!("http_provider.headers: {name:?} is not a valid header name"),
            )
        })?;
        let mut value = HeaderValue::from_str(value).map_err(|_| {
            Error::new(
                Status::InvalidArgument,
                format!("http_provider.headers: the value of {name} is not a valid header value"),
            )
        })?;
        value.set_sensitive(true);
        headers.insert(name.clone(), value);
        sensitive.push(name);
    }
    if let Some(token) = &config.bearer_token {
        let mut value = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
            Error::new(
                Status::InvalidArgument,
                "http_provider.bearer_token holds characters a header cannot carry",
            )
        })?;
        value.set_sensitive(true);
        headers.insert(AUTHORIZATION, value);
    }
    Ok(sensitive)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_and_headers() {
        let config = HttpProviderConfig {
            headers: [("X-Api-Key".to_string(), "k".to_string())].into(),
            bearer_token: Some("t".to_string()),
            follow_redirects: None,
        };
        let mut h = HeaderMap::new();
        let sensitive = apply(&config, &mut h).unwrap();
        assert_eq!(h.get(AUTHORIZATION).unwrap(), "Bearer t");
        assert_eq!(h.get("x-api-key").unwrap(), "k");
        assert_eq!(sensitive, vec![HeaderName::from_static("x-api-key")]);
    }

    #[test]
    fn bad_header_names_are_clear_errors() {
        let config = HttpProviderConfig {
            headers: [("bad header".to_string(), "k".to_string())].into(),
            ..HttpProviderConfig::default()
        };
        let e = apply(&config, &mut HeaderMap::new()).unwrap_err();
        assert_eq!(e.status(), Status::InvalidArgument);
        assert!(e.message().contains("bad header"), "{e}");
    }
}
