//! The client's [`TokenClient`]: token exchanges (service accounts, client secrets, managed
//! identities, metadata servers) sent with the same transport settings as reads, so a
//! deployment behind a private CA or proxy trusts its token endpoint as it trusts its store.
//!
//! Built once per client (per process: a forked child builds its own with its engine), on the
//! client's [`TlsConfig`] (the platform's roots and `http.ca_file`, aws-lc-rs, built once and
//! shared with the event loops, so TLS sessions resume), its DNS cache and its connect timeout.
//! Connections are kept and reused (hyper-util's pooled client, on the credential runtime:
//! exchanges are rare, so its per-request costs do not matter here). HTTP/1.1 only: token
//! endpoints are small answers, and ALPN never depends on `http.version`. A transport failure
//! is reported with its cause named as reads name it (an untrusted certificate points at
//! `http.ca_file`) and its source chain kept.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};

use crate::http::failure::{TransportKind, classify};
use crate::http::transport::{BoxError, DnsCache, Resolver, TlsConfig};
use crate::sdk::token::{SendFuture, TOKEN_ANSWER_MAX, TokenClient, TokenReply, TokenRequest};

/// How long an idle connection to a token endpoint is kept.
const IDLE: Duration = Duration::from_secs(90);

type Http = HttpConnector<Resolver>;

/// The client's token client: plain HTTP (metadata servers) and HTTPS, each built at its first
/// use (the TLS roots are loaded only when an `https://` endpoint is first called).
pub(crate) struct HttpTokenClient {
    tls: Arc<TlsConfig>,
    http: Http,
    plain: tokio::sync::OnceCell<Client<Http, Full<Bytes>>>,
    https: tokio::sync::OnceCell<Client<HttpsConnector<Http>, Full<Bytes>>>,
}

impl HttpTokenClient {
    /// A token client on the client's TLS configuration, DNS cache and connect timeout.
    pub(crate) fn new(tls: Arc<TlsConfig>, dns: Arc<DnsCache>, connect_timeout: Duration) -> Self {
        let mut http = HttpConnector::new_with_resolver(Resolver::new(dns));
        http.enforce_http(false);
        http.set_nodelay(true);
        http.set_connect_timeout(Some(connect_timeout));
        HttpTokenClient {
            tls,
            http,
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

    async fn send(&self, request: TokenRequest) -> Result<TokenReply, BoxError> {
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
        let body = Limited::new(response.into_body(), TOKEN_ANSWER_MAX)
            .collect()
            .await
            .map_err(|e| match e.downcast::<hyper::Error>() {
                Ok(e) => failed(*e, false),
                Err(e) => e,
            })?
            .to_bytes();
        Ok(TokenReply { status, body })
    }
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
        Box::pin(HttpTokenClient::send(self, request))
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
