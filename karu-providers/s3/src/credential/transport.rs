//! The HTTP client aws-config's credential chain sends its requests with: Karu's own token
//! client ([`TokenClient`]), so that instance metadata, container credentials, STS and SSO are
//! asked as every other credential exchange is: with the client's TLS roots and DNS cache,
//! and tried again under the client's retry policy (a `429`, a `5xx`, a connection refused or
//! reset) within the lookup's deadline ([`bridge::lookup_ends`]), instead of failing every read
//! that waits for the credential after one throttled answer.
//!
//! aws-config builds its chain once per credential scope, but each lookup comes with its own
//! context: [`Lookups`] holds the token client and the deadline of the lookup under way, and
//! [`Discovery`](super::Discovery) sets them for the length of each lookup.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, HttpResponse};
use aws_smithy_runtime_api::client::result::ConnectorError;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_runtime_api::http::StatusCode;
use aws_smithy_types::body::SdkBody;
use http::{HeaderName, HeaderValue, Method};
use http_body_util::Full;
use karu_engine::sdk::FetchContext;
use karu_engine::sdk::bridge;
use karu_engine::sdk::token::{TokenClient, TokenRequest};
use parking_lot::Mutex;

/// The lookup under way: the token client its requests are sent with, and when it must end.
/// When lookups of one scope overlap (one given up at its read's deadline while the next
/// starts), the newest is the one requests are sent for, and the end of an older one leaves it.
#[derive(Default)]
pub(crate) struct Lookups {
    current: Mutex<Option<Current>>,
    next: AtomicU64,
}

struct Current {
    lookup: u64,
    client: Arc<dyn TokenClient>,
    until: Instant,
}

impl Lookups {
    /// Send aws-config's requests for the lookup of `ctx` until the guard is dropped.
    pub(crate) fn enter(self: &Arc<Self>, ctx: &FetchContext) -> Entered {
        let lookup = self.next.fetch_add(1, Ordering::Relaxed);
        let until = bridge::lookup_ends(ctx, Instant::now());
        *self.current.lock() = ctx.token_client().map(|client| Current {
            lookup,
            client,
            until,
        });
        Entered {
            lookups: self.clone(),
            lookup,
        }
    }
}

/// Ends a lookup entered in [`Lookups`].
pub(crate) struct Entered {
    lookups: Arc<Lookups>,
    lookup: u64,
}

impl Drop for Entered {
    fn drop(&mut self) {
        let mut current = self.lookups.current.lock();
        if current.as_ref().is_some_and(|c| c.lookup == self.lookup) {
            *current = None;
        }
    }
}

/// aws-config's HTTP client and connector, over [`Lookups`].
#[derive(Clone)]
pub(crate) struct Transport(pub(crate) Arc<Lookups>);

impl fmt::Debug for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Transport(Karu's token client)")
    }
}

impl HttpClient for Transport {
    fn http_connector(
        &self,
        _settings: &HttpConnectorSettings,
        _components: &RuntimeComponents,
    ) -> SharedHttpConnector {
        // Timeouts are the lookup's: its deadline bounds every attempt.
        SharedHttpConnector::new(self.clone())
    }
}

impl HttpConnector for Transport {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let current = self
            .0
            .current
            .lock()
            .as_ref()
            .map(|c| (c.client.clone(), c.until));
        HttpConnectorFuture::new(async move {
            let (client, until) = current.ok_or_else(|| {
                ConnectorError::other(
                    "an AWS credential request was made outside a Karu credential lookup".into(),
                    None,
                )
            })?;
            let request =
                token_request(&request).map_err(|why| ConnectorError::other(why.into(), None))?;
            let reply = client
                .exchange(request, Some(until))
                .await
                .map_err(ConnectorError::io)?;
            let status = StatusCode::try_from(reply.status)
                .map_err(|e| ConnectorError::other(e.into(), None))?;
            // A body aws-config reads as a stream: its traces show an in-memory body's bytes,
            // and these are credentials.
            let body = SdkBody::from_body_1_x(Full::new(reply.body));
            let mut response = HttpResponse::new(status, body);
            for (name, value) in &reply.headers {
                if let Ok(value) = value.to_str() {
                    response
                        .headers_mut()
                        .append(name.as_str().to_owned(), value.to_owned());
                }
            }
            Ok(response)
        })
    }
}

/// aws-config's request as a [`TokenRequest`]: its method, address, headers and body (a form,
/// a JSON document or nothing: these requests never carry a stream or binary data).
fn token_request(request: &HttpRequest) -> Result<TokenRequest, String> {
    let method = Method::from_bytes(request.method().as_bytes())
        .map_err(|_| format!("an unknown method {:?}", request.method()))?;
    let mut built = TokenRequest::new(method, request.uri());
    for (name, value) in request.headers() {
        let name = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("a header name {name:?} HTTP cannot carry"))?;
        let value = HeaderValue::from_str(value)
            .map_err(|_| format!("a value of {name} HTTP cannot carry"))?;
        built = built.with_header(name, value);
    }
    let body = request
        .body()
        .bytes()
        .ok_or("a streamed request body (credential requests are small)")?;
    if !body.is_empty() {
        let body = std::str::from_utf8(body).map_err(|_| "a request body that is not text")?;
        built = built.with_body(body);
    }
    Ok(built)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_imds_token_request_keeps_its_method_headers_and_empty_body() {
        let mut request = HttpRequest::new(SdkBody::from(""));
        request.set_method("PUT").unwrap();
        request
            .set_uri("http://169.254.169.254/latest/api/token")
            .unwrap();
        request
            .headers_mut()
            .insert("x-aws-ec2-metadata-token-ttl-seconds", "21600");
        let built = token_request(&request).unwrap();
        assert_eq!(built.method(), Method::PUT);
        assert_eq!(built.url(), "http://169.254.169.254/latest/api/token");
        assert_eq!(
            built.headers()["x-aws-ec2-metadata-token-ttl-seconds"],
            "21600"
        );
        assert!(built.headers()["x-aws-ec2-metadata-token-ttl-seconds"].is_sensitive());
        assert_eq!(built.body(), None);
    }

    #[test]
    fn a_form_body_is_sent_as_it_is() {
        let mut request = HttpRequest::new(SdkBody::from("Action=AssumeRoleWithWebIdentity"));
        request.set_method("POST").unwrap();
        request.set_uri("https://sts.amazonaws.com/").unwrap();
        let built = token_request(&request).unwrap();
        assert_eq!(built.body(), Some("Action=AssumeRoleWithWebIdentity"));
    }

    #[derive(Debug)]
    struct Unused;

    impl TokenClient for Unused {
        fn send(&self, _request: TokenRequest) -> karu_engine::sdk::token::SendFuture<'_> {
            unreachable!("no request is sent")
        }
    }

    #[test]
    fn the_end_of_an_older_lookup_leaves_the_newer_one_in_place() {
        let lookups = Arc::<Lookups>::default();
        let ctx = FetchContext::new(None).with_token_client(Arc::new(Unused));
        let older = lookups.enter(&ctx);
        let newer = lookups.enter(&ctx);
        drop(older);
        let current = lookups.current.lock().as_ref().map(|c| c.lookup);
        assert_eq!(current, Some(newer.lookup));
        drop(newer);
        assert!(lookups.current.lock().is_none());
    }

    #[test]
    fn a_request_outside_a_lookup_fails_without_being_sent() {
        use std::future::Future;
        use std::task::{Context, Poll, Waker};

        let transport = Transport(Arc::default());
        let mut call = std::pin::pin!(transport.call(HttpRequest::new(SdkBody::empty())));
        let Poll::Ready(Err(error)) = call.as_mut().poll(&mut Context::from_waker(Waker::noop()))
        else {
            panic!("a request outside a lookup was not refused at once");
        };
        assert!(
            format!("{error:?}").contains("outside a Karu credential lookup"),
            "{error:?}"
        );
    }
}
