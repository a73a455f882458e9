//! What a backend builds for each attempt: the `PreparedRequest`, and the hooks around it.

use std::cell::RefCell;
use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use http::header::{ACCEPT_ENCODING, HeaderName, HeaderValue, IF_MATCH, RANGE};
use http::{HeaderMap, Uri};
use karu_config::{Scoped, Snapshot};
use serde::de::DeserializeOwned;

use crate::sdk::credential::Credential;
use crate::sdk::locator::Locator;
use crate::sdk::range::RangeSpec;
use crate::sdk::redact;
use crate::sdk::status::{Error, Status};

/// What the engine tells a backend when it asks for a request: built late, per attempt.
#[derive(Debug)]
#[non_exhaustive]
pub struct PrepareContext<'a> {
    /// The object (without window: the range is absolute).
    pub locator: &'a Locator,
    /// The range to request: the prepared request's `Range` header must be exactly this
    /// range ([`PreparedRequest::get`] sets it), or the engine refuses to send it.
    pub range: RangeSpec,
    /// The identity condition to send as `If-Match`, if any.
    pub if_match: Option<&'a str>,
    /// The client's configuration, for the backend's own section and path rules.
    pub snapshot: &'a Snapshot,
    /// The credential for this object's scope, when the backend has a credential provider.
    pub credential: Option<&'a Credential>,
    /// A region learned from a previous answer (one-time region correction).
    pub region_hint: Option<&'a str>,
    /// The attempt number (1-based), for logging.
    pub attempt: u32,
}

impl PrepareContext<'_> {
    /// The backend's configuration section `name` for this object, with the path rules that
    /// match it applied (see [`section`](crate::sdk::section)).
    pub fn section<T>(&self, name: &str) -> Result<Arc<Scoped<T>>, Error>
    where
        T: DeserializeOwned + Send + Sync + 'static,
    {
        crate::sdk::section(self.snapshot, self.locator, name)
    }
}

/// Per-request transport options a backend may set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct HttpOptions {
    /// Follow redirects (plain, unsigned requests only). `Authorization` and the headers in
    /// [`HttpOptions::sensitive_headers`] are dropped when a redirect leaves the original
    /// scheme, host and port.
    pub follow_redirects: bool,
    /// Ask for stored gzip bytes (`Accept-Encoding: gzip`), so a gzip-encoded answer is the
    /// stored representation (GCS). Otherwise Karu asks for `identity`.
    pub accept_stored_gzip: bool,
    /// Headers that must never follow a redirect to another host, besides `Authorization`.
    pub sensitive_headers: Vec<HeaderName>,
    /// The URL redirects to a location the backend's `reusable_location` keeps (the Hugging
    /// Face resolve endpoint): when several transfers of one object start without a kept
    /// location, one asks the URL and the others wait for the location it keeps (never past
    /// their deadline; if it keeps none, each asks for itself).
    pub resolve_once: bool,
}

/// The one request shape every backend produces: URL, headers (the byte range among them, as
/// `Range`) and HTTP options. The engine sends it; a backend never does.
///
/// The engine checks that the `Range` header is exactly the context's range before sending,
/// and its `Debug` shows neither header values nor the URL's query or user information.
#[derive(Clone)]
#[non_exhaustive]
pub struct PreparedRequest {
    /// Absolute `http://` or `https://` URL.
    pub url: Uri,
    /// Headers, including `Range`, `If-Match`, `Accept-Encoding` (set by
    /// [`PreparedRequest::get`]) and the backend's authentication.
    pub headers: HeaderMap,
    /// Transport options.
    pub options: HttpOptions,
}

impl PreparedRequest {
    /// A `GET` of `url` for the context's range: sets `Range`, `If-Match` (when the context
    /// has a condition) and `Accept-Encoding: identity`. Add authentication afterwards.
    pub fn get(url: &str, ctx: &PrepareContext<'_>) -> Result<Self, Error> {
        let url = request_url(url).map_err(|why| {
            let message = match why {
                UrlError::Unparsable => {
                    format!("cannot build a request URL for {}", ctx.locator.canonical())
                }
                UrlError::NotHttp => {
                    format!("{} does not map to an http(s) URL", ctx.locator.canonical())
                }
            };
            Error::new(Status::InvalidArgument, message)
        })?;
        let mut headers = HeaderMap::new();
        // Digits, `bytes=` and `-` only: always a valid header value. Its buffer is shared, so
        // a copy (kept for a redirect, see `exchange`) costs a count, not an allocation.
        let range = HeaderValue::from_maybe_shared(Bytes::from_owner(ctx.range.header_bytes()))
            .map_err(|_| Error::new(Status::Internal, "a Range header could not be built"))?;
        headers.insert(RANGE, range);
        if let Some(condition) = ctx.if_match {
            headers.insert(IF_MATCH, header_value(condition)?);
        }
        headers.insert(ACCEPT_ENCODING, HeaderValue::from_static("identity"));
        Ok(PreparedRequest {
            url,
            headers,
            options: HttpOptions::default(),
        })
    }

    /// Ask for stored gzip bytes instead of `identity` (see [`HttpOptions::accept_stored_gzip`]).
    pub fn accept_stored_gzip(mut self) -> Self {
        self.options.accept_stored_gzip = true;
        self.headers
            .insert(ACCEPT_ENCODING, HeaderValue::from_static("gzip"));
        self
    }
}

/// Why a backend's URL cannot be requested.
enum UrlError {
    Unparsable,
    NotHttp,
}

thread_local! {
    /// The URL this thread parsed last, and its parse. The requests of one object ask for one
    /// URL, and parsing it again is a noticeable part of what a small read costs an event loop.
    static LAST_URL: RefCell<Option<(Box<str>, Uri)>> = const { RefCell::new(None) };
}

/// `url` parsed, if it is an absolute `http://` or `https://` URL with a host.
fn request_url(url: &str) -> Result<Uri, UrlError> {
    let remembered = LAST_URL
        .try_with(|last| match &*last.borrow() {
            Some((text, parsed)) if **text == *url => Some(parsed.clone()),
            _ => None,
        })
        .ok()
        .flatten();
    if let Some(parsed) = remembered {
        return Ok(parsed);
    }
    let parsed: Uri = url.parse().map_err(|_| UrlError::Unparsable)?;
    if !matches!(parsed.scheme_str(), Some("http" | "https")) || parsed.host().is_none() {
        return Err(UrlError::NotHttp);
    }
    // Fails only while the thread is being torn down; the URL is then parsed every time.
    let _ = LAST_URL.try_with(|last| *last.borrow_mut() = Some((url.into(), parsed.clone())));
    Ok(parsed)
}

fn header_value(value: &str) -> Result<HeaderValue, Error> {
    HeaderValue::from_str(value).map_err(|_| {
        Error::new(
            Status::InvalidArgument,
            "a header value holds characters HTTP does not allow",
        )
    })
}

impl fmt::Debug for PreparedRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never header values, a query string or user information: they may carry
        // signatures, tokens or passwords.
        f.debug_struct("PreparedRequest")
            .field("url", &redact::uri(&self.url))
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("range", &self.headers.get(RANGE))
            .field("options", &self.options)
            .finish()
    }
}

/// An error answer, as a backend sees it when asked for a correction.
#[derive(Debug)]
#[non_exhaustive]
pub struct ErrorResponse<'a> {
    /// HTTP status.
    pub status: u16,
    /// Response headers.
    pub headers: &'a HeaderMap,
    /// The first bytes of the body (at most the error-body limit).
    pub body: &'a [u8],
}

/// A one-time correction a backend asks for after an error answer.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Correction {
    /// Prepare the request again, for this region (e.g. S3's `x-amz-bucket-region`).
    Reprepare {
        /// The region to prepare for.
        region: String,
    },
    /// The credential expired: invalidate its cache entry and authenticate again.
    Reauthenticate,
}

/// What a backend can do, so the engine can plan around what it cannot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Capabilities {
    /// Whether the service honours suffix ranges (`bytes=-n`). When false, `read_ends` asks
    /// for the head first and then the tail with `If-Match` on the head's ETag.
    pub suffix_ranges: bool,
}

impl Default for Capabilities {
    fn default() -> Self {
        Capabilities {
            suffix_ranges: true,
        }
    }
}

impl Capabilities {
    /// A service that ignores suffix ranges (Azure).
    pub fn without_suffix_ranges() -> Self {
        Capabilities {
            suffix_ranges: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sdk::locator::{CanonicalPath, Resolved};
    use crate::sdk::testing::FileBackend;

    /// An object the tests prepare requests for (its backend is never asked).
    fn object() -> Locator {
        Locator::new(
            Arc::new(FileBackend),
            Resolved::remote(CanonicalPath::new("x://h/o"), None, "o".into()),
        )
    }

    fn context<'a>(locator: &'a Locator, snapshot: &'a Snapshot) -> PrepareContext<'a> {
        PrepareContext {
            locator,
            range: RangeSpec::Closed { first: 5, last: 9 },
            if_match: Some("\"v1\""),
            snapshot,
            credential: None,
            region_hint: None,
            attempt: 1,
        }
    }

    #[test]
    fn get_sets_the_range_the_condition_and_identity() {
        let locator = object();
        let snapshot = Snapshot::defaults();
        let request = PreparedRequest::get("https://h/o", &context(&locator, &snapshot)).unwrap();
        assert_eq!(request.headers.get(RANGE).unwrap(), "bytes=5-9");
        assert_eq!(request.headers.get(IF_MATCH).unwrap(), "\"v1\"");
        assert_eq!(request.headers.get(ACCEPT_ENCODING).unwrap(), "identity");
        assert_eq!(request.options, HttpOptions::default());
        for bad in ["ftp://h/o", "/relative", "https://"] {
            let error = PreparedRequest::get(bad, &context(&locator, &snapshot)).unwrap_err();
            assert_eq!(error.status(), Status::InvalidArgument, "{bad}");
        }
    }

    #[test]
    fn each_request_gets_its_own_url_when_the_thread_remembers_the_last() {
        let locator = object();
        let snapshot = Snapshot::defaults();
        let ctx = context(&locator, &snapshot);
        let urls = [
            "https://h/o",
            "https://h/o",
            "https://h/o?versionId=2",
            "http://h:8080/o",
            "https://h/o",
        ];
        for url in urls {
            let request = PreparedRequest::get(url, &ctx).unwrap();
            assert_eq!(request.url.to_string(), url);
        }
        // A URL refused after an accepted one is refused, for its own reason, and does not
        // replace the remembered one.
        for bad in ["ftp://h/o", "/o", "https://", "https://h o/x"] {
            let error = PreparedRequest::get(bad, &ctx).unwrap_err();
            assert_eq!(error.status(), Status::InvalidArgument, "{bad}");
            assert!(!error.is_transient(), "{bad}");
            let request = PreparedRequest::get("https://h/o", &ctx).unwrap();
            assert_eq!(request.url.to_string(), "https://h/o");
            let request = PreparedRequest::get("https://h/p", &ctx).unwrap();
            assert_eq!(request.url.to_string(), "https://h/p");
        }
    }

    #[test]
    fn debug_shows_no_secret() {
        let locator = object();
        let snapshot = Snapshot::defaults();
        let ctx = context(&locator, &snapshot);
        let mut request =
            PreparedRequest::get("https://user:PASSWORD@h:8443/o?sig=SIGNATURE", &ctx).unwrap();
        request
            .headers
            .insert("authorization", HeaderValue::from_static("Bearer TOKEN"));
        let shown = format!("{request:?}");
        for secret in ["PASSWORD", "SIGNATURE", "TOKEN", "user"] {
            assert!(!shown.contains(secret), "{secret} in {shown}");
        }
        assert!(
            shown.contains("https://<redacted>@h:8443/o?<redacted>"),
            "{shown}"
        );
        assert!(
            shown.contains("authorization") && shown.contains("bytes=5-9"),
            "{shown}"
        );
    }
}
