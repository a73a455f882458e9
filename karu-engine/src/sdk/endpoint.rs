//! What a provider's configured endpoint may be: the one rule every provider checks.

use karu_config::InvalidKey;

use super::redact;

/// Why `endpoint` cannot be a provider's endpoint, worded to follow "this one", or `None`
/// when it can: an `http` or `https` URL with a host, optionally a port and a path (a proxy's
/// prefix), and nothing a request URL could not carry after it: no query or fragment (the
/// object's path is appended to the endpoint) and no user information (credentials belong in
/// their own settings, where they are redacted, not in a URL that is logged).
///
/// ```
/// use karu_engine::sdk::endpoint_problem;
/// assert_eq!(endpoint_problem("http://127.0.0.1:9000/"), None);
/// assert_eq!(endpoint_problem("https://proxy.example/s3"), None);
/// assert!(endpoint_problem("http://key:secret@127.0.0.1:9000").is_some());
/// ```
pub fn endpoint_problem(endpoint: &str) -> Option<&'static str> {
    let Ok(url) = url::Url::parse(endpoint) else {
        return Some("is not a URL");
    };
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        Some("is not an http or https URL with a host")
    } else if url.query().is_some() || url.fragment().is_some() {
        Some("has a query or fragment, which the object's path cannot follow")
    } else if !url.username().is_empty() || url.password().is_some() {
        Some("has user information (credentials go in their own settings)")
    } else {
        None
    }
}

/// [`endpoint_problem`] as a section's [`check`](super::SectionConfig::check) reports it: the
/// `key` refused, expecting a URL such as `example`, the value quoted with its user
/// information, query and fragment redacted.
pub fn check_endpoint(key: &str, endpoint: &str, example: &str) -> Result<(), InvalidKey> {
    let Some(problem) = endpoint_problem(endpoint) else {
        return Ok(());
    };
    let expected = format!("an http or https URL such as {example}; this one {problem}");
    Err(InvalidKey::new(key, expected).shown_as(shown_endpoint(endpoint)))
}

/// An endpoint as a message may quote it: [`redact::address`], and a fragment redacted too
/// (an endpoint is a URL, never a file name with a `#` in it).
pub fn shown_endpoint(endpoint: &str) -> String {
    let mut shown = redact::address(endpoint);
    if let Some(fragment) = shown.find('#') {
        shown.replace_range(fragment + 1.., redact::REDACTED);
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_http_urls_a_path_can_follow() {
        for fine in [
            "http://127.0.0.1:9000",
            "http://127.0.0.1:9000/",
            "https://s3.example",
            "https://proxy.example/prefix/",
            "http://[::1]:9000",
        ] {
            assert_eq!(endpoint_problem(fine), None, "{fine}");
        }
        for (bad, problem) in [
            ("not a url", "is not a URL"),
            ("127.0.0.1:9000", "is not a URL"),
            ("s3.example:9000", "is not an http or https URL"),
            ("ftp://x", "is not an http or https URL"),
            ("file:///tmp", "is not an http or https URL"),
            ("http://", "is not a URL"),
            ("http://host/?x=1", "has a query or fragment"),
            ("http://host/#x", "has a query or fragment"),
            ("http://user@host", "has user information"),
            ("http://:secret@host", "has user information"),
            ("http://key:secret@host", "has user information"),
        ] {
            let found = endpoint_problem(bad);
            assert!(
                found.is_some_and(|f| f.starts_with(problem)),
                "{bad}: {found:?}"
            );
        }
    }

    #[test]
    fn a_refused_endpoint_is_shown_redacted() {
        let refused =
            check_endpoint("endpoint", "https://k:hunter2@h/p?sig=x", "https://h").unwrap_err();
        assert_eq!(refused.key(), "endpoint");
        assert!(
            refused
                .expected()
                .starts_with("an http or https URL such as https://h; this one")
        );
        assert_eq!(refused.shown(), Some("https://<redacted>@h/p?<redacted>"));
        let refused = check_endpoint("endpoint", "https://h/p#token", "https://h").unwrap_err();
        assert_eq!(refused.shown(), Some("https://h/p#<redacted>"));
        assert_eq!(
            check_endpoint("endpoint", "https://h/p/", "https://h"),
            Ok(())
        );
    }
}
