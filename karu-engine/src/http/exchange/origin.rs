//! Origins: which URLs share one (credentials never go to another), and the `host:port` that
//! messages name.

use http::header::{AUTHORIZATION, HeaderName};
use http::{HeaderMap, Uri};

/// Remove what must never go to another origin: `Authorization` and the backend's sensitive
/// headers.
pub(super) fn strip_credentials(headers: &mut HeaderMap, sensitive: &[HeaderName]) {
    headers.remove(AUTHORIZATION);
    for name in sensitive {
        headers.remove(name);
    }
}

/// `scheme://host:port` of a URL (default ports made explicit), for origin comparisons.
pub(super) fn origin_of(url: &Uri) -> String {
    let scheme = url.scheme_str().unwrap_or("");
    let port = url
        .port_u16()
        .unwrap_or(if scheme == "https" { 443 } else { 80 });
    format!(
        "{scheme}://{}:{port}",
        url.host().unwrap_or("").to_ascii_lowercase()
    )
}

/// `host:port` for messages (never the path or query). Found on every request: a byte scan
/// of the few bytes of an authority, cheaper than `rsplit('@')`.
pub(super) fn host_of(url: &Uri) -> &str {
    let Some(authority) = url.authority().map(|a| a.as_str()) else {
        return "";
    };
    match authority.bytes().rposition(|b| b == b'@') {
        Some(at) => &authority[at + 1..],
        None => authority,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins() {
        let a: Uri = "https://Example.com/a".parse().unwrap();
        let b: Uri = "https://example.com:443/b?x".parse().unwrap();
        let c: Uri = "http://example.com/a".parse().unwrap();
        assert_eq!(origin_of(&a), origin_of(&b));
        assert_ne!(origin_of(&a), origin_of(&c));
        let u: Uri = "http://user:pw@h:81/p?q".parse().unwrap();
        assert_eq!(host_of(&u), "h:81");
    }
}
