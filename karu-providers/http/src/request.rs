//! URL normalisation (resolution) and request building (preparation).

use karu_engine::sdk::{
    CanonicalPath, Error, PrepareContext, PreparedRequest, Resolved, Status, redact,
};
use url::Url;

use crate::config::HttpProviderConfig;
use crate::credential;

/// Parse and normalise an `http(s)://` URL: lower-case scheme and host, no default port, dot
/// segments resolved, fragment dropped. The query stays part of the identity (it may select
/// the object) but is redacted wherever the canonical path is displayed.
pub(crate) fn resolve(address: &str) -> Result<Resolved, Error> {
    let invalid = |why: &str| {
        Error::new(
            Status::InvalidArgument,
            format!("invalid HTTP address {}: {why}", redact::address(address)),
        )
    };
    let mut url = Url::parse(address).map_err(|e| invalid(&e.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(invalid("the scheme must be http or https"));
    }
    let Some(host) = url.host_str() else {
        return Err(invalid("the URL has no host"));
    };
    if !url.username().is_empty() || url.password().is_some() {
        return Err(invalid(
            "credentials in the URL are not accepted; configure http_provider.bearer_token or headers",
        ));
    }
    let container = match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_string(),
    };
    url.set_fragment(None);
    let key = url.path().trim_start_matches('/').to_string();
    Ok(Resolved::remote(
        CanonicalPath::new(url.as_str()),
        Some(container),
        key,
    ))
}

/// Build the request of one attempt.
pub(crate) fn prepare(
    ctx: &PrepareContext<'_>,
    config: &HttpProviderConfig,
) -> Result<PreparedRequest, Error> {
    let mut request = PreparedRequest::get(ctx.locator.canonical().as_str(), ctx)?;
    request.options.sensitive_headers = credential::apply(config, &mut request.headers)?;
    request.options.follow_redirects = config.follows_redirects();
    Ok(request)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canonical(a: &str) -> String {
        resolve(a).unwrap().canonical.as_str().to_string()
    }

    #[test]
    fn spellings_normalise() {
        assert_eq!(
            canonical("http://EXAMPLE.com:80/a/b"),
            "http://example.com/a/b"
        );
        assert_eq!(canonical("https://h:443/a"), "https://h/a");
        assert_eq!(canonical("https://h:8443/a"), "https://h:8443/a");
        assert_eq!(canonical("https://h/a/./b/../c#x"), "https://h/a/c");
        assert_eq!(canonical("https://h/a?x=1"), "https://h/a?x=1");
        assert_eq!(
            canonical("http://127.0.0.1:9000/o"),
            "http://127.0.0.1:9000/o"
        );
    }

    #[test]
    fn container_and_key() {
        let r = resolve("https://h:8443/dir/obj.bin").unwrap();
        assert_eq!(r.container.as_deref(), Some("h:8443"));
        assert_eq!(r.key, "dir/obj.bin");
    }

    #[test]
    fn invalid_addresses() {
        for bad in ["https://", "ftp://h/a", "https://user:pw@h/a", "not a url"] {
            let e = resolve(bad).unwrap_err();
            assert_eq!(e.status(), Status::InvalidArgument, "{bad}");
            assert!(!e.message().contains("pw@"), "{e}");
        }
        let e = resolve("https://user:pw@h/a?sig=SECRET").unwrap_err();
        assert!(!e.message().contains("SECRET"), "{e}");
    }
}
