//! Path rule prefixes: refused when malformed, and brought to the canonical form that canonical
//! paths have, so that `HTTP://Host/data` applies to `http://host/data/x`.

use std::fmt;
use std::sync::Arc;

/// Turns a prefix as written into the canonical form of the addresses it covers, or says why
/// it cannot be one.
pub(crate) type Canonicalise = dyn Fn(&str) -> Result<String, String> + Send + Sync;

/// How path rule prefixes are canonicalised: the checks every prefix passes, then the
/// client's address resolution when one was given (see
/// [`ConfigBuilder::canonical_prefixes`](crate::ConfigBuilder::canonical_prefixes)), else
/// [`generic`].
#[derive(Clone, Default)]
pub(crate) struct Prefixes {
    resolver: Option<Arc<Canonicalise>>,
}

impl fmt::Debug for Prefixes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.resolver.is_some() {
            "resolved like addresses"
        } else {
            "generic"
        })
    }
}

impl Prefixes {
    /// Canonicalise with `resolver` after the common checks.
    pub(crate) fn resolved_by(resolver: Arc<Canonicalise>) -> Self {
        Self {
            resolver: Some(resolver),
        }
    }

    /// The canonical form of `prefix`.
    pub(crate) fn canonical(&self, prefix: &str) -> Result<String, String> {
        check(prefix)?;
        match &self.resolver {
            Some(resolve) => resolve(prefix),
            None => generic(prefix),
        }
    }
}

/// What every prefix must be: not empty, no control characters, and a URL prefix without a
/// query or fragment (a canonical path has neither).
fn check(prefix: &str) -> Result<(), String> {
    if prefix.is_empty() {
        return Err("a path rule prefix must not be empty".into());
    }
    if prefix.chars().any(char::is_control) {
        return Err("a path rule prefix must not hold control characters".into());
    }
    if let Some((scheme, rest)) = prefix.split_once("://") {
        if !is_scheme(scheme) {
            return Err(format!(
                "{scheme:?} is not a URL scheme (expected a path such as /data or a URL prefix \
                 such as s3://bucket/)"
            ));
        }
        if rest.contains(['?', '#']) {
            return Err("a path rule prefix cannot hold a query (?) or a fragment (#)".into());
        }
    }
    Ok(())
}

/// RFC 3986: a letter, then letters, digits, `+`, `-`, `.`.
fn is_scheme(scheme: &str) -> bool {
    let mut chars = scheme.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

/// The canonical form without knowing the providers: the scheme and host of a URL prefix
/// lower-cased (`HTTP://Host/Data` is `http://host/Data`); a path must be absolute, since only
/// address resolution knows what a relative one would mean.
pub(crate) fn generic(prefix: &str) -> Result<String, String> {
    check(prefix)?;
    match prefix.split_once("://") {
        Some((scheme, rest)) => {
            let host_end = rest.find('/').unwrap_or(rest.len());
            Ok(format!(
                "{}://{}{}",
                scheme.to_ascii_lowercase(),
                rest[..host_end].to_ascii_lowercase(),
                &rest[host_end..]
            ))
        }
        None if prefix.starts_with('/') => Ok(prefix.to_owned()),
        None => Err(
            "expected an absolute path such as /data or a URL prefix such as s3://bucket/".into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generic_prefixes_lower_case_scheme_and_host() {
        assert_eq!(
            generic("HTTP://Host.Example:8080/Data/x"),
            Ok("http://host.example:8080/Data/x".into())
        );
        assert_eq!(generic("S3://Bucket"), Ok("s3://bucket".into()));
        assert_eq!(generic("s3://"), Ok("s3://".into()));
        assert_eq!(generic("/data/local/"), Ok("/data/local/".into()));
    }

    #[test]
    fn malformed_prefixes_are_refused() {
        for (prefix, says) in [
            ("", "must not be empty"),
            ("data/local", "absolute path"),
            ("s3://b/k?versionId=1", "query"),
            ("https://h/#frag", "fragment"),
            ("1x://y", "not a URL scheme"),
            ("/a\u{0}b", "control characters"),
        ] {
            let error = generic(prefix).unwrap_err();
            assert!(error.contains(says), "{prefix:?}: {error}");
        }
    }

    #[test]
    fn a_resolver_runs_after_the_common_checks() {
        let prefixes = Prefixes::resolved_by(Arc::new(|p: &str| Ok(format!("resolved {p}"))));
        assert_eq!(prefixes.canonical("rel"), Ok("resolved rel".into()));
        assert!(prefixes.canonical("").is_err());
        assert!(prefixes.canonical("s3://b?x").is_err());
        assert_eq!(format!("{prefixes:?}"), "resolved like addresses");
    }
}
