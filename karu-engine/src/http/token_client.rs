//! The client's [`TokenClient`]: token exchanges (service accounts, client secrets, managed
//! identities, metadata servers) sent with the same transport settings as reads, so a
//! deployment behind a private CA (`http.ca_file`) trusts its token endpoint as it trusts its
//! store.
//!
//! Built once per client (per process: a forked child builds its own with its engine), on the
//! client's [`TlsConfig`] (the platform's roots and `http.ca_file`, aws-lc-rs, built once and
//! shared with the event loops, so TLS sessions resume), its DNS cache and its connect timeout.
//! Connections are kept and reused (hyper-util's pooled client, on the credential runtime:
//! exchanges are rare, so its per-request costs do not matter here). HTTP/1.1 only: token
//! endpoints are small answers, and ALPN never depends on `http.version`. A transport failure
//! is reported with its cause named as reads name it (an untrusted certificate points at
//! `http.ca_file`) and its source chain kept.
//!
//! An exchange ([`TokenClient::exchange`]) is tried again as a read's request would be, under
//! the client's retry policy (`[retry]`, the pure [`crate::retry`] core): after a `408`,
//! `425`, `429` or `5xx` answer (its `Retry-After` honoured) or a retryable transport failure
//! (a connection refused or reset), with waits that grow and carry jitter, within the policy's
//! attempts and deadline and the lookup's own (the read's). A token endpoint that throttles or
//! restarts for a moment so no longer fails every read waiting for its credential.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};

use crate::http::failure::{TransportKind, classify};
use crate::http::transport::{BoxError, DnsCache, Resolver, TlsConfig};
use crate::retry::{Decision, FailureClass, RetryAfter, RetryPolicy, RetryState};
use crate::sdk::token::{SendFuture, TOKEN_ANSWER_MAX, TokenClient, TokenReply, TokenRequest};
use crate::sdk::{classify_status, redact};

/// How long an idle connection to a token endpoint is kept.
const IDLE: Duration = Duration::from_secs(90);

type Http = HttpConnector<Resolver>;

/// The client's token client: plain HTTP (metadata servers) and HTTPS, each built at its first
/// use (the TLS roots are loaded only when an `https://` endpoint is first called).
pub(crate) struct HttpTokenClient {
    tls: Arc<TlsConfig>,
    http: Http,
    /// The client's retry policy, for exchanges.
    retry: RetryPolicy,
    plain: tokio::sync::OnceCell<Client<Http, Full<Bytes>>>,
    https: tokio::sync::OnceCell<Client<HttpsConnector<Http>, Full<Bytes>>>,
}

impl HttpTokenClient {
    /// A token client on the client's TLS configuration, DNS cache and connect timeout,
    /// trying exchanges again under `retry`.
    pub(crate) fn new(
        tls: Arc<TlsConfig>,
        dns: Arc<DnsCache>,
        connect_timeout: Duration,
        retry: RetryPolicy,
    ) -> Self {
        let mut http = HttpConnector::new_with_resolver(Resolver::new(dns));
        http.enforce_http(false);
        http.set_nodelay(true);
        http.set_connect_timeout(Some(connect_timeout));
        HttpTokenClient {
            tls,
            http,
            retry,
            plain: tokio::sync::OnceCell::new(),
            https: tokio::sync::OnceCell::new(),
        }
    }

    fn pooled<C>(connector: C) -> Client<C, Full<Bytes>>
    where
        C: hyper_util::client::legacy::connect::Connect + Clone,
    {
        Client::builder(TokioExecutor::new())
            .pool_idle_timeout(IDLE)
            .pool_timer(TokioTimer::new())
            .build(connector)
    }

    /// Send `request`, and again after each failure another attempt may not meet, as the
    /// retry policy allows within it and `deadline`: the last answer or failure.
    async fn exchange(
        &self,
        request: TokenRequest,
        deadline: Option<Instant>,
    ) -> Result<TokenReply, BoxError> {
        let mut retry = RetryState::until(self.retry, Instant::now(), deadline);
        let mut rng = fastrand::Rng::new();
        loop {
            let attempt = retry.start_attempt();
            let started = Instant::now();
            let sent = self.send(request.clone()).await;
            let (class, retry_after) = match &sent {
                Ok(sent) => (status_class(sent.reply.status), sent.retry_after),
                Err(error) => (
                    Some(
                        error
                            .downcast_ref::<TokenTransport>()
                            .map_or(FailureClass::Permanent, |failure| failure.kind.class()),
                    ),
                    None,
                ),
            };
            let now = Instant::now();
            let decision = match class {
                // An answer to read (a token, or a refusal to report).
                None => return sent.map(|sent| sent.reply),
                Some(class) => {
                    retry.handle_failure(class, retry_after, now - started, now, &mut rng)
                }
            };
            let Decision::RetryAfter(wait) = decision else {
                return sent.map(|sent| sent.reply);
            };
            tracing::debug!(
                target: "karu::credentials",
                url = %redact::address(request.url()),
                attempt,
                ?class,
                wait_ms = wait.as_millis() as u64,
                "a token exchange failed; trying again"
            );
            tokio::time::sleep(wait).await;
        }
    }

    /// Send `request` once.
    async fn send(&self, request: TokenRequest) -> Result<Sent, BoxError> {
        let https = request.url().starts_with("https://");
        let mut builder = http::Request::builder()
            .method(request.method().clone())
            .uri(request.url());
        for (name, value) in request.headers() {
            builder = builder.header(name, value);
        }
        let body = Full::new(Bytes::from(request.body().unwrap_or_default().to_owned()));
        let http_request = builder
            .body(body)
            .map_err(|_| BoxError::from("not a valid request address"))?;
        let sent = if https {
            let client = self
                .https
                .get_or_try_init(|| async {
                    let mut config = (*self.tls.get().await?).clone();
                    config.alpn_protocols = vec![b"http/1.1".to_vec()];
                    let connector = HttpsConnector::from((self.http.clone(), config));
                    Ok::<_, BoxError>(Self::pooled(connector))
                })
                .await?;
            client.request(http_request).await
        } else {
            let client = self
                .plain
                .get_or_init(|| async { Self::pooled(self.http.clone()) })
                .await;
            client.request(http_request).await
        };
        let response = sent.map_err(|e| {
            let connecting = e.is_connect();
            failed(e, connecting)
        })?;
        let status = response.status().as_u16();
        let (parts, body) = response.into_parts();
        let retry_after = parts
            .headers
            .get(http::header::RETRY_AFTER)
            .and_then(|value| value.to_str().ok())
            .and_then(RetryAfter::parse)
            .map(|after| after.wait(SystemTime::now()));
        let body = Limited::new(body, TOKEN_ANSWER_MAX)
            .collect()
            .await
            .map_err(|e| match e.downcast::<hyper::Error>() {
                Ok(e) => failed(*e, false),
                Err(e) => e,
            })?
            .to_bytes();
        Ok(Sent {
            reply: TokenReply {
                status,
                headers: parts.headers,
                body,
            },
            retry_after,
        })
    }
}

/// One exchange's answer, and the wait its `Retry-After` asks for.
struct Sent {
    reply: TokenReply,
    retry_after: Option<Duration>,
}

/// The retry class of an answer's status; `None` for an answer to read as it is (a token, or
/// a refusal no other attempt would change).
fn status_class(status: u16) -> Option<FailureClass> {
    classify_status(status)
        .retryable
        .then_some(FailureClass::RetryableStatus(status))
}

/// A transport failure, its kind named as reads name it.
fn failed(error: impl std::error::Error + Send + Sync + 'static, connecting: bool) -> BoxError {
    let kind = classify(&error, connecting);
    Box::new(TokenTransport {
        kind,
        source: Box::new(error),
    })
}

/// A token exchange's transport failure: what [`classify`] makes of it, and the error itself.
#[derive(Debug, thiserror::Error)]
#[error("{kind}")]
pub(crate) struct TokenTransport {
    kind: TransportKind,
    #[source]
    source: BoxError,
}

impl TokenClient for HttpTokenClient {
    fn send(&self, request: TokenRequest) -> SendFuture<'_> {
        Box::pin(async move { HttpTokenClient::send(self, request).await.map(|s| s.reply) })
    }

    fn exchange(&self, request: TokenRequest, deadline: Option<Instant>) -> SendFuture<'_> {
        Box::pin(HttpTokenClient::exchange(self, request, deadline))
    }
}

impl fmt::Debug for HttpTokenClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpTokenClient")
            .field("tls", &self.tls)
            .field("plain", &self.plain.initialized())
            .field("https", &self.https.initialized())
            .finish_non_exhaustive()
    }
}
