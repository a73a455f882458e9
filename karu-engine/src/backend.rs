//! The `Backend` trait providers implement, and the registry that maps addresses to backends.

use std::fmt;
use std::sync::Arc;

use parking_lot::RwLock;

use http::HeaderMap;
use karu_config::Snapshot;

use crate::credential::CredentialSource;
use crate::http::request::{
    Capabilities, Correction, ErrorResponse, PrepareContext, PreparedRequest,
};
use crate::locator::{Locator, Resolved};
use crate::status::{Error, Status};

/// A provider: turns addresses into [`Locator`]s and, for remote objects, resolved objects and
/// ranges into requests the engine sends. A backend never does input or output for a read.
///
/// Implement it in a provider crate and register it with [`Registry::register`]. A local
/// backend only implements [`Backend::resolve`] (returning [`Resolved::file`]); a remote one
/// also implements [`Backend::prepare`], and the hooks it needs.
pub trait Backend: Send + Sync + fmt::Debug + 'static {
    /// A short stable name (`"local"`, `"http"`, `"s3"`), used in messages and for grouping.
    fn name(&self) -> &str;

    /// Parse an address into its canonical identity. Pure: no network, no credentials, no
    /// filesystem access beyond what is needed to make a path absolute.
    fn resolve(&self, address: &str) -> Result<Resolved, Error>;

    /// Build the request of one attempt: URL, headers (start from
    /// [`PreparedRequest::get`], then authenticate), the context's range, options, region.
    /// Called late, for every attempt, so credentials and corrections are current.
    fn prepare(&self, ctx: &PrepareContext<'_>) -> Result<PreparedRequest, Error> {
        Err(Error::new(
            Status::Unsupported,
            format!(
                "the {} backend cannot prepare requests for {}",
                self.name(),
                ctx.locator.canonical()
            ),
        ))
    }

    /// How requests for `locator` are authenticated: `None` for anonymous access (the
    /// transfer joins the HTTP queue directly), or the scope and provider of its credential
    /// (the transfer first visits a credential worker). Must not do input or output: the
    /// lookup itself is the provider's [`fetch`](crate::credential::CredentialProvider::fetch).
    fn credential_source(
        &self,
        locator: &Locator,
        snapshot: &Snapshot,
    ) -> Result<Option<CredentialSource>, Error> {
        let _ = (locator, snapshot);
        Ok(None)
    }

    /// What the service can do.
    fn capabilities(&self) -> Capabilities {
        Capabilities::default()
    }

    /// After an error answer: whether a one-time correction applies (a wrong region, an
    /// expired credential). Decided from the status, headers and the first bytes of the body.
    fn correction(&self, response: &ErrorResponse<'_>) -> Option<Correction> {
        let _ = response;
        None
    }

    /// Whether a successful answer's headers show the service transformed the bytes (for
    /// example decompressed them), beyond the `Content-Encoding` check the engine makes.
    fn transformed(&self, headers: &HeaderMap) -> bool {
        let _ = headers;
        false
    }
}

/// Maps schemes (`"s3"`) and longer address prefixes (`"https://huggingface.co/"`) to
/// backends. Addresses without a scheme are plain local paths and use the `file` scheme.
///
/// ```
/// # use std::sync::Arc;
/// use karu_engine::Registry;
/// let registry = Registry::new();
/// registry.register("file", Arc::new(karu_engine::testing::FileBackend));
/// let locator = registry.resolve("/tmp/example.bin")?;
/// assert_eq!(locator.backend().name(), "local");
/// assert!(registry.resolve("gs://bucket/key").is_err());
/// # Ok::<(), karu_engine::Error>(())
/// ```
#[derive(Default)]
pub struct Registry {
    entries: RwLock<Vec<Entry>>,
}

struct Entry {
    /// A lower-case scheme (`"s3"`) or an address prefix containing `"://"`.
    pattern: String,
    backend: Arc<dyn Backend>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Register `backend` for a scheme (`"s3"`, `"file"`) or an address prefix containing
    /// `"://"` (`"https://huggingface.co/"`). A prefix's host may start with `*.` to match
    /// any subdomain (`"https://*.amazonaws.com/"` matches `https://b.s3.amazonaws.com/k`).
    /// A later registration of the same pattern replaces the earlier one. Prefixes win over
    /// schemes; the longest matching prefix wins.
    pub fn register(&self, pattern: &str, backend: Arc<dyn Backend>) {
        let pattern = if pattern.contains("://") {
            normalise_prefix(pattern)
        } else {
            pattern.to_ascii_lowercase()
        };
        let mut entries = self.entries.write();
        entries.retain(|e| e.pattern != pattern);
        entries.push(Entry { pattern, backend });
    }

    /// The patterns registered, sorted.
    pub fn patterns(&self) -> Vec<String> {
        let mut patterns: Vec<String> = self
            .entries
            .read()
            .iter()
            .map(|e| e.pattern.clone())
            .collect();
        patterns.sort();
        patterns
    }

    /// The backend for an address: the longest registered prefix it starts with, else its
    /// scheme's backend (plain paths use `file`).
    pub fn backend_for(&self, address: &str) -> Result<Arc<dyn Backend>, Error> {
        let scheme = scheme_of(address);
        // Prefixes are matched against the URL as a URL parser reads it (the form the
        // backends resolve, and canonical paths spell): `https:/h`, `https://h:443` and
        // `HTTPS:\\h` are all `https://h/`, so no spelling reaches another backend than the
        // canonical path does.
        let normalised = scheme
            .as_ref()
            .and_then(|_| url::Url::parse(address).ok())
            .filter(url::Url::has_host)
            .map(String::from);
        let matched = normalised.as_deref().unwrap_or(address);
        let scheme = scheme.unwrap_or_else(|| "file".to_string());
        let entries = self.entries.read();
        let by_prefix = entries
            .iter()
            .filter(|e| e.pattern.contains("://") && prefix_matches(matched, &e.pattern))
            .max_by_key(|e| e.pattern.len());
        if let Some(entry) = by_prefix {
            return Ok(Arc::clone(&entry.backend));
        }
        entries
            .iter()
            .find(|e| e.pattern == scheme)
            .map(|e| Arc::clone(&e.backend))
            .ok_or_else(|| {
                Error::new(
                    Status::Unsupported,
                    format!(
                        "no backend is registered for scheme \"{scheme}\" (registered: {})",
                        entries
                            .iter()
                            .map(|e| e.pattern.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )
            })
    }

    /// Resolve an address to a [`Locator`]. Never touches the network or credentials.
    pub fn resolve(&self, address: &str) -> Result<Locator, Error> {
        let backend = self.backend_for(address)?;
        let resolved = backend.resolve(address)?;
        Ok(Locator::new(backend, resolved))
    }
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry")
            .field("patterns", &self.patterns())
            .finish()
    }
}

/// The scheme of an address (RFC 3986: a letter, then letters, digits, `+`, `-`, `.`, then
/// `:`), lower-cased; `None` for a plain path.
pub fn scheme_of(address: &str) -> Option<String> {
    let colon = address.find(':')?;
    let scheme = &address[..colon];
    let mut chars = scheme.chars();
    let first = chars.next()?;
    if !first.is_ascii_alphabetic()
        || !chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    {
        return None;
    }
    Some(scheme.to_ascii_lowercase())
}

/// Lower-case the scheme and host of a prefix so matching is case-insensitive there.
fn normalise_prefix(prefix: &str) -> String {
    match prefix.find("://") {
        Some(i) => {
            let rest = &prefix[i + 3..];
            let host_end = rest.find('/').unwrap_or(rest.len());
            format!(
                "{}://{}{}",
                prefix[..i].to_ascii_lowercase(),
                rest[..host_end].to_ascii_lowercase(),
                &rest[host_end..]
            )
        }
        None => prefix.to_string(),
    }
}

/// Whether `address` starts with the normalised prefix pattern (scheme and host compared
/// case-insensitively; a host of `*.suffix` matches any subdomain of `suffix`).
fn prefix_matches(address: &str, pattern: &str) -> bool {
    let (Some(p), Some(a)) = (pattern.find("://"), address.find("://")) else {
        return false;
    };
    if !pattern[..p].eq_ignore_ascii_case(&address[..a]) {
        return false;
    }
    let (p_rest, a_rest) = (&pattern[p + 3..], &address[a + 3..]);
    let p_host_end = p_rest.find('/').unwrap_or(p_rest.len());
    let a_host_end = a_rest.find(['/', '?', '#']).unwrap_or(a_rest.len());
    let (p_host, a_host) = (&p_rest[..p_host_end], &a_rest[..a_host_end]);
    let host_ok = match p_host.strip_prefix("*.") {
        Some(suffix) => {
            let a_host = a_host.to_ascii_lowercase();
            a_host.len() > suffix.len() + 1
                && a_host.ends_with(suffix)
                && a_host.as_bytes()[a_host.len() - suffix.len() - 1] == b'.'
        }
        None => p_host.eq_ignore_ascii_case(a_host),
    };
    host_ok && a_rest[a_host_end..].starts_with(&p_rest[p_host_end..])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::FileBackend;

    #[derive(Debug)]
    struct Named(&'static str);
    impl Backend for Named {
        fn name(&self) -> &str {
            self.0
        }
        fn resolve(&self, address: &str) -> Result<Resolved, Error> {
            Ok(Resolved::remote(
                crate::CanonicalPath::new(address),
                None,
                address.to_string(),
            ))
        }
    }

    #[test]
    fn schemes() {
        assert_eq!(scheme_of("s3://b/k").as_deref(), Some("s3"));
        assert_eq!(scheme_of("HTTPS://x").as_deref(), Some("https"));
        assert_eq!(scheme_of("/abs/path").as_deref(), None);
        assert_eq!(scheme_of("rel/pa:th").as_deref(), None);
        assert_eq!(scheme_of("1x:y").as_deref(), None);
        assert_eq!(scheme_of(":y").as_deref(), None);
    }

    #[test]
    fn longest_prefix_wins_over_scheme() {
        let r = Registry::new();
        r.register("https", Arc::new(Named("http")));
        r.register("http", Arc::new(Named("http")));
        r.register("https://huggingface.co/", Arc::new(Named("hf")));
        r.register(
            "https://huggingface.co/datasets/",
            Arc::new(Named("hf-datasets")),
        );
        r.register("file", Arc::new(FileBackend));
        r.register("https://*.amazonaws.com/", Arc::new(Named("s3")));
        let name = |a: &str| r.backend_for(a).unwrap().name().to_string();
        assert_eq!(name("https://example.com/x"), "http");
        assert_eq!(name("https://b.s3.us-east-1.amazonaws.com/k"), "s3");
        assert_eq!(name("https://B.S3.AMAZONAWS.COM/k"), "s3");
        assert_eq!(name("https://amazonaws.com/k"), "http");
        assert_eq!(name("https://evilamazonaws.com/k"), "http");
        assert_eq!(name("http://b.s3.amazonaws.com/k"), "http");
        assert_eq!(name("https://HuggingFace.co/m/resolve/main/x"), "hf");
        assert_eq!(name("https://huggingface.co/datasets/d/x"), "hf-datasets");
        assert_eq!(name("/tmp/x"), "local");
        // Found by the `resolve` fuzz target: spellings a URL parser reads as the same URL
        // reached the plain HTTP backend, whose canonical path then resolved through S3.
        for spelling in [
            "https:/b.s3.amazonaws.com/k",
            "https://b.s3.amazonaws.com:443/k",
            "HTTPS:\\\\b.s3.amazonaws.com\\k",
            "https://b.s3.amazonaws%2Ecom/k",
        ] {
            assert_eq!(name(spelling), "s3", "{spelling}");
        }
        assert_eq!(name("https://b.s3.amazonaws.com:8443/k"), "http");
        assert_eq!(name(" https://b.s3.amazonaws.com/k"), "local", "not a URL");
        let err = r.backend_for("gs://b/k").unwrap_err();
        assert_eq!(err.status(), Status::Unsupported);
        assert!(err.message().contains("\"gs\""), "{err}");
    }

    #[test]
    fn re_registration_replaces() {
        let r = Registry::new();
        r.register("s3", Arc::new(Named("one")));
        r.register("S3", Arc::new(Named("two")));
        assert_eq!(r.patterns(), vec!["s3".to_string()]);
        assert_eq!(r.backend_for("s3://b/k").unwrap().name(), "two");
    }
}
