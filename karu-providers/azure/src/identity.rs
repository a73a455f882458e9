//! Sends the token requests of [`token`] on a small rustls HTTP client, through
//! the SDK's credential [`bridge`] (bounded by the read's deadline), and hands the engine a
//! bearer credential carrying its expiry.

use std::fmt;
use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_rustls::ConfigBuilderExt;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use karu_engine::sdk::http::{Method, Request};
use karu_engine::sdk::{
    CREDENTIAL_FILE_MAX, Credential, CredentialProvider, Error, FetchContext, Status, bridge,
    error_body, read_credential_file, read_regular_file, redact,
};

use crate::assertion;
use crate::credential::AzureSecret;
use crate::token::{self, TokenSource};

/// What can go wrong sending a token request; never holds the request body or a token.
#[derive(Debug)]
enum ExchangeError {
    Tls(String),
    Request(String),
    Transport(String),
    Refused { status: u16, message: String },
    Answer(&'static str),
    TokenFile(String),
    Certificate(String),
}

impl fmt::Display for ExchangeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExchangeError::Tls(e) => write!(f, "TLS configuration: {e}"),
            ExchangeError::Request(e) => write!(f, "cannot build the request: {e}"),
            ExchangeError::Transport(e) => write!(f, "the token endpoint is unreachable: {e}"),
            ExchangeError::Refused { status, message } => {
                write!(f, "the token endpoint answered {status}: {message}")
            }
            ExchangeError::Answer(why) => write!(f, "unusable token answer: {why}"),
            ExchangeError::TokenFile(e) => write!(f, "cannot read the federated token file: {e}"),
            ExchangeError::Certificate(e) => {
                write!(f, "cannot sign a client assertion with the certificate {e}")
            }
        }
    }
}

impl std::error::Error for ExchangeError {}

/// Looks up tokens from one source for one credential scope.
#[derive(Debug)]
pub(crate) struct TokenProvider {
    source: TokenSource,
}

impl TokenProvider {
    pub(crate) fn new(source: TokenSource) -> Self {
        TokenProvider { source }
    }
}

impl CredentialProvider for TokenProvider {
    fn fetch(&self, ctx: &FetchContext) -> Result<Credential, Error> {
        let failed = |e: ExchangeError| Error::new(Status::Credentials, e.to_string());
        let assertion = match &self.source {
            TokenSource::Workload { token_file, .. } => Some(
                read_credential_file(Path::new(token_file))
                    .map_err(|e| failed(ExchangeError::TokenFile(format!("{token_file}: {e}"))))?,
            ),
            TokenSource::Certificate {
                client_id,
                cert_path,
                ..
            } => {
                let pem = read_regular_file(Path::new(cert_path), CREDENTIAL_FILE_MAX)
                    .map_err(|e| failed(ExchangeError::Certificate(format!("{cert_path}: {e}"))))?;
                let now = SystemTime::now();
                let jti = format!(
                    "karu-{}-{}",
                    std::process::id(),
                    now.duration_since(std::time::UNIX_EPOCH)
                        .unwrap_or_default()
                        .as_nanos()
                );
                let audience = self.source.token_url().unwrap_or_default();
                Some(
                    assertion::build(&pem, &audience, client_id, now, &jti).map_err(|why| {
                        failed(ExchangeError::Certificate(format!("{cert_path}: {why}")))
                    })?,
                )
            }
            _ => None,
        };
        let request = self.source.request(assertion.as_deref());
        let (token, expires) = bridge::block_on(ctx, self.source.name(), exchange(request))?;
        Ok(Credential::new(AzureSecret::Bearer(token)).with_expiry(Some(expires)))
    }
}

async fn exchange(request: token::TokenRequest) -> Result<(String, SystemTime), ExchangeError> {
    let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| ExchangeError::Tls(e.to_string()))?
    .with_native_roots()
    .map_err(|e| ExchangeError::Tls(e.to_string()))?
    .with_no_client_auth();
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .build();
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build(connector);
    let method = if request.method == "POST" {
        Method::POST
    } else {
        Method::GET
    };
    let mut builder = Request::builder()
        .method(method)
        .uri(&request.url)
        .header("accept", "application/json");
    for (name, value) in &request.headers {
        builder = builder.header(*name, value);
    }
    let body = Full::new(Bytes::from(request.body.unwrap_or_default()));
    let http_request = builder
        .body(body)
        .map_err(|e| ExchangeError::Request(redact::text(&e.to_string())))?;
    let response = client
        .request(http_request)
        .await
        .map_err(|e| ExchangeError::Transport(redact::error_chain(&e)))?;
    let status = response.status().as_u16();
    let bytes = response
        .into_body()
        .collect()
        .await
        .map_err(|e| ExchangeError::Transport(redact::error_chain(&e)))?
        .to_bytes();
    if status != 200 {
        let text = String::from_utf8_lossy(&bytes);
        // OAuth answers name an `error` and explain it in `error_description`.
        let description = serde_json::from_slice::<serde_json::Value>(&bytes)
            .ok()
            .and_then(|v| {
                let d = v.get("error_description")?.as_str()?.to_string();
                Some(match v.get("error").and_then(|e| e.as_str()) {
                    Some(code) => format!("{code}: {d}"),
                    None => d,
                })
            });
        let message = description
            .or_else(|| error_body::json_message(&text))
            .map(|m| redact::text(&m))
            .unwrap_or_else(|| "no error description".into());
        return Err(ExchangeError::Refused { status, message });
    }
    token::parse(&bytes, SystemTime::now()).map_err(ExchangeError::Answer)
}
