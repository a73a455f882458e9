//! Signed `PUT`s for populating a real endpoint (the conformance suite's only writes), and
//! the plain client the read-only suite takes its references with.

use std::time::SystemTime;

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{
    PayloadChecksumKind, PercentEncodingMode, SignableBody, SignableRequest, SigningSettings,
    UriPathNormalizationMode, sign,
};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

pub(crate) struct Signer<'a> {
    pub(crate) access_key_id: &'a str,
    pub(crate) secret_access_key: &'a str,
    pub(crate) region: &'a str,
}

/// PUT `body` at `url`, signed; returns the status.
pub(super) fn put(url: &str, body: &[u8], signer: &Signer<'_>) -> Result<u16, String> {
    send(signed("PUT", url, body, signer)?)
}

/// A `method` request for `url` with `body`, signed with SigV4 for S3.
pub(crate) fn signed(
    method: &str,
    url: &str,
    body: &[u8],
    signer: &Signer<'_>,
) -> Result<http::Request<Full<Bytes>>, String> {
    let credentials = Credentials::new(
        signer.access_key_id,
        signer.secret_access_key,
        None,
        None,
        "karu-conformance",
    );
    let identity: Identity = credentials.into();
    let mut settings = SigningSettings::default();
    settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
    settings.percent_encoding_mode = PercentEncodingMode::Single;
    settings.uri_path_normalization_mode = UriPathNormalizationMode::Disabled;
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(signer.region)
        .name("s3")
        .time(SystemTime::now())
        .settings(settings)
        .build()
        .map_err(|e| e.to_string())?
        .into();
    let length = body.len().to_string();
    let signable = SignableRequest::new(
        method,
        url,
        [("content-length", length.as_str())].into_iter(),
        SignableBody::Bytes(body),
    )
    .map_err(|e| e.to_string())?;
    let (instructions, _) = sign(signable, &params)
        .map_err(|e| e.to_string())?
        .into_parts();
    let mut request = http::Request::builder()
        .method(method)
        .uri(url)
        .header("content-length", length)
        .body(Full::new(Bytes::copy_from_slice(body)))
        .map_err(|e| e.to_string())?;
    instructions.apply_to_request_http1x(&mut request);
    Ok(request)
}

/// `POST` `body` to `url` with a bearer token (GCS's JSON API upload); returns the status.
pub(super) fn post_bearer(url: &str, token: &str, body: &[u8]) -> Result<u16, String> {
    let request = http::Request::builder()
        .method("POST")
        .uri(url)
        .header("authorization", format!("Bearer {token}"))
        .header("content-type", "application/octet-stream")
        .header("content-length", body.len().to_string())
        .body(Full::new(Bytes::copy_from_slice(body)))
        .map_err(|e| e.to_string())?;
    send(request)
}

/// Send `request` over HTTP(S) (rustls, the platform's roots); returns the status.
fn send(request: http::Request<Full<Bytes>>) -> Result<u16, String> {
    exchange(request).map(|(status, _)| status)
}

/// Send `request` over HTTP(S) (rustls, the platform's roots); returns the status and
/// the first 4 KiB of the body, as text.
pub(super) fn exchange(request: http::Request<Full<Bytes>>) -> Result<(u16, String), String> {
    let (status, _, body) = fetch(request)?;
    let text = String::from_utf8_lossy(&body[..body.len().min(4096)]).into_owned();
    Ok((status, text))
}

/// Send `request` over HTTP(S) (rustls, the platform's roots), following no redirect;
/// returns the status, the headers and the whole body.
pub(crate) fn fetch(
    request: http::Request<Full<Bytes>>,
) -> Result<(u16, http::HeaderMap, Bytes), String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async move {
        let mut tls = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
            rustls::crypto::aws_lc_rs::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates({
            let mut roots = rustls::RootCertStore::empty();
            for cert in rustls_native_certs::load_native_certs().certs {
                let _ = roots.add(cert);
            }
            roots
        })
        .with_no_client_auth();
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        let mut http = hyper_util::client::legacy::connect::HttpConnector::new();
        http.enforce_http(false);
        let connector = hyper_rustls::HttpsConnector::from((http, tls));
        let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build(connector);
        let response = client.request(request).await.map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("the body of a {status} answer broke off: {e}"))?
            .to_bytes();
        Ok((status, headers, body))
    })
}
