//! The HTTP client a token exchange is sent with ([`TokenClient`]), and what it sends and
//! receives ([`TokenRequest`], [`TokenReply`]). The engine builds one client per Karu client,
//! from its configuration (the TLS roots with `http.ca_file`, the connect timeout, the DNS
//! cache, connection reuse), and hands it to every credential lookup in its
//! [`FetchContext`](crate::sdk::FetchContext).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::time::Instant;

use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE, HeaderName, HeaderValue};
use http::{HeaderMap, Method};

use crate::sdk::redact;
use crate::sdk::token::form::form;

/// The most bytes of a token answer (or of a refusal) a [`TokenClient`] reads: token answers
/// are a few kilobytes.
pub const TOKEN_ANSWER_MAX: usize = 64 * 1024;

/// An error a [`TokenClient`] reports: its source chain is kept (and shown redacted).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What [`TokenClient::send`] returns.
pub type SendFuture<'a> = Pin<Box<dyn Future<Output = Result<TokenReply, BoxError>> + Send + 'a>>;

/// One request to a token endpoint or a metadata server: a `GET`, a `POST` of a form, or
/// (for a vendor SDK's own exchanges, such as IMDSv2's `PUT` of a session token) any method
/// with a text body. Its `Debug` shows the method and the address without its query; never
/// a header value or the body (they hold secrets: a client secret, an assertion, an identity
/// header).
#[derive(Clone)]
pub struct TokenRequest {
    method: Method,
    url: String,
    headers: HeaderMap,
    body: Option<String>,
}

impl TokenRequest {
    /// A `GET` of `url` (a metadata server's or a managed identity's token).
    pub fn get(url: impl Into<String>) -> Self {
        let mut request = TokenRequest::new(Method::GET, url);
        request
            .headers
            .insert(ACCEPT, HeaderValue::from_static("application/json"));
        request
    }

    /// A request of `method` to `url` with no header and no body: what a vendor SDK's
    /// exchange is built from ([`with_header`](TokenRequest::with_header),
    /// [`with_body`](TokenRequest::with_body)).
    pub fn new(method: Method, url: impl Into<String>) -> Self {
        TokenRequest {
            method,
            url: url.into(),
            headers: HeaderMap::new(),
            body: None,
        }
    }

    /// Send `body` with the request.
    pub fn with_body(mut self, body: impl Into<String>) -> Self {
        self.body = Some(body.into());
        self
    }

    /// Add a header, marked sensitive (its value may be a secret); a second value of a name
    /// is added beside the first.
    pub fn with_header(mut self, name: HeaderName, mut value: HeaderValue) -> Self {
        value.set_sensitive(true);
        self.headers.append(name, value);
        self
    }

    /// A `POST` of the form `pairs` to `url` (`application/x-www-form-urlencoded`, see
    /// [`form`]).
    pub fn post_form(url: impl Into<String>, pairs: &[(&str, &str)]) -> Self {
        let mut request = TokenRequest::get(url);
        request.method = Method::POST;
        request.headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("application/x-www-form-urlencoded"),
        );
        request.body = Some(form(pairs));
        request
    }

    /// Add a header (marked sensitive: its value may be a secret). A value a header cannot
    /// carry is dropped, and the endpoint's refusal says what is missing.
    pub fn header(mut self, name: &'static str, value: &str) -> Self {
        if let Ok(mut value) = HeaderValue::from_str(value) {
            value.set_sensitive(true);
            self.headers.insert(HeaderName::from_static(name), value);
        }
        self
    }

    /// The method.
    pub fn method(&self) -> &Method {
        &self.method
    }

    /// The address.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The headers.
    pub fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    /// The body: a `POST`'s form, or what [`with_body`](TokenRequest::with_body) gave.
    pub fn body(&self) -> Option<&str> {
        self.body.as_deref()
    }
}

impl fmt::Debug for TokenRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenRequest")
            .field("method", &self.method)
            .field("url", &redact::address(&self.url))
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

/// What a token endpoint answered: its status, its headers and at most [`TOKEN_ANSWER_MAX`]
/// bytes of its body. Its `Debug` shows the status, the headers' names and the body's length
/// only.
#[derive(Clone)]
pub struct TokenReply {
    /// The HTTP status.
    pub status: u16,
    /// The headers (IMDSv2 states a session token's lifetime in one).
    pub headers: HeaderMap,
    /// The body.
    pub body: Bytes,
}

impl fmt::Debug for TokenReply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenReply")
            .field("status", &self.status)
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("body_len", &self.body.len())
            .finish()
    }
}

/// Sends token requests. The engine's own (built once per client from its configuration) is
/// what lookups get in their [`FetchContext`](crate::sdk::FetchContext); a test may hand a
/// lookup its own.
///
/// `send` runs on the credential runtime ([`bridge`](crate::sdk::bridge)); it reads at most
/// [`TOKEN_ANSWER_MAX`] bytes of the body (more is an error) and reports transport failures
/// with their source chain, whose message names the likely cause (an untrusted certificate:
/// `http.ca_file`).
pub trait TokenClient: Send + Sync + fmt::Debug {
    /// Send `request` and read the answer.
    fn send(&self, request: TokenRequest) -> SendFuture<'_>;

    /// Send `request` as [`send`](TokenClient::send) does, and again after a failure another
    /// attempt may not meet, until an answer comes that is worth reading or `deadline` (when
    /// the lookup must end) leaves no room for another attempt: what
    /// [`fetch_token`](crate::sdk::token::fetch_token) sends with. Returns the last answer or
    /// failure. The engine's client retries under the client's retry policy (`[retry]`: a
    /// `408`, `425`, `429` or `5xx` answer, a connection refused or reset; waits that grow,
    /// with jitter, and honour `Retry-After`); this default sends once.
    fn exchange(&self, request: TokenRequest, deadline: Option<Instant>) -> SendFuture<'_> {
        let _ = deadline;
        self.send(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_show_no_secret() {
        let r = TokenRequest::post_form(
            "https://login.example/t/token?code=SECRET",
            &[("client_secret", "SECRET")],
        )
        .header("x-identity-header", "SECRET");
        assert_eq!(r.method(), Method::POST);
        assert_eq!(r.body(), Some("client_secret=SECRET"));
        assert!(r.headers()["x-identity-header"].is_sensitive());
        let shown = format!("{r:?}");
        assert!(!shown.contains("SECRET"), "{shown}");
        assert!(shown.contains("x-identity-header"), "{shown}");
        let reply = TokenReply {
            status: 200,
            headers: HeaderMap::new(),
            body: Bytes::from_static(b"{\"access_token\":\"SECRET\"}"),
        };
        assert!(!format!("{reply:?}").contains("SECRET"));
    }
}
