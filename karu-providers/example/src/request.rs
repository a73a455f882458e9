//! Address parsing and request building.

use karu_engine::provider::http::header::{AUTHORIZATION, HeaderValue};
use karu_engine::provider::{
    CanonicalPath, Error, PrepareContext, PreparedRequest, Resolved, Status, redact,
};

use crate::credential::Token;

/// `toy://host:port/key`: the host and port are the container, the rest is the key.
pub(crate) fn resolve(address: &str) -> Result<Resolved, Error> {
    let invalid = |why: &str| {
        let shown = redact::address(address);
        Error::new(
            Status::InvalidArgument,
            format!("invalid toy address {shown}: {why}"),
        )
    };
    let rest = address
        .get(..6)
        .filter(|s| s.eq_ignore_ascii_case("toy://"))
        .map(|_| &address[6..])
        .ok_or_else(|| invalid("not a toy:// address"))?;
    let (host, key) = rest.split_once('/').ok_or_else(|| invalid("no key"))?;
    if host.is_empty()
        || key.is_empty()
        || host.contains(['@', '?', '#'])
        || key.contains(['?', '#'])
    {
        return Err(invalid("expected toy://host:port/key"));
    }
    let host = host.to_ascii_lowercase();
    let canonical = CanonicalPath::new(format!("toy://{host}/{key}"));
    Ok(Resolved::remote(canonical, Some(host), key.to_string()))
}

/// A `GET` of `http://host:port/key` for the context's range, with the bearer token.
pub(crate) fn prepare(ctx: &PrepareContext<'_>) -> Result<PreparedRequest, Error> {
    let locator = ctx.locator;
    let host = locator.container().unwrap_or_default();
    let mut request = PreparedRequest::get(&format!("http://{host}/{}", locator.key()), ctx)?;
    let token = ctx
        .credential
        .and_then(|c| c.get::<Token>())
        .ok_or_else(|| {
            let what = format!("no toy token for {}", locator.canonical());
            Error::new(Status::Credentials, what)
        })?;
    let mut value = HeaderValue::from_str(&format!("Bearer {}", token.0))
        .map_err(|_| Error::new(Status::InvalidArgument, "the toy token cannot be a header"))?;
    value.set_sensitive(true);
    request.headers.insert(AUTHORIZATION, value);
    Ok(request)
}
