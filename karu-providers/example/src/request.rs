//! Address parsing and request building.

use karu_engine::sdk::http::header::{AUTHORIZATION, HeaderValue};
use karu_engine::sdk::{
    CanonicalPath, Error, PrepareContext, PreparedRequest, Resolved, Status, encode_path, redact,
};

use crate::credential::Token;

/// `toy://host:port/key`: the host and port are the container, the rest is the key.
pub(crate) fn resolve(address: &str) -> Result<Resolved, Error> {
    let invalid = |why: &str| {
        let message = format!("invalid toy address {}: {why}", redact::address(address));
        Error::new(Status::InvalidArgument, message)
    };
    let rest = match address.split_at_checked(6) {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("toy://") => rest,
        _ => return Err(invalid("not a toy:// address")),
    };
    let (host, key) = rest.split_once('/').unwrap_or((rest, ""));
    // A key may hold any character but those that would end a URL's path.
    if host.is_empty() || key.is_empty() || host.contains('@') || rest.contains(['?', '#']) {
        return Err(invalid("expected toy://host:port/key"));
    }
    let host = host.to_ascii_lowercase();
    let canonical = CanonicalPath::new(format!("toy://{host}/{key}"));
    Ok(Resolved::remote(canonical, Some(host), key.to_string()))
}

/// A `GET` of `http://host:port/key` (the key percent-encoded as every provider's paths are)
/// for the context's range, with the bearer token.
pub(crate) fn prepare(ctx: &PrepareContext<'_>) -> Result<PreparedRequest, Error> {
    let locator = ctx.locator;
    let host = locator.container().unwrap_or_default();
    let url = format!("http://{host}/{}", encode_path(locator.key()));
    let mut request = PreparedRequest::get(&url, ctx)?;
    let Some(Token(token)) = ctx.credential.and_then(|c| c.get::<Token>()) else {
        return Err(Error::new(Status::Credentials, "no toy token was obtained"));
    };
    let mut value = HeaderValue::from_str(&format!("Bearer {token}"))
        .map_err(|_| Error::new(Status::InvalidArgument, "the toy token cannot be a header"))?;
    value.set_sensitive(true);
    request.headers.insert(AUTHORIZATION, value);
    Ok(request)
}
