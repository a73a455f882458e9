//! The credential adapters (features `azure-core` and `gcp-auth`, on in the workspace's test
//! build): an `azure_identity` `ClientSecretCredential` pointed at the Azure mock's Entra ID
//! fakes, and an application's own `gcp_auth::TokenProvider`, authenticate reads; their tokens
//! are cached under the prefix given (one exchange for two objects) and asked for again when a
//! read's `401` says one expired.

#![cfg(all(feature = "azure-core", feature = "gcp-auth"))]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use karu::{Client, ClientBuilder};
use karu_testkit::azure::TokenCall;
use karu_testkit::gcs::GcsMock;
use karu_testkit::{AzureMock, Identity, pattern};

const TENANT: &str = "72f988bf-0000-0000-0000-000000000001";

fn isolated() -> ClientBuilder {
    Client::builder()
        .user_config_file(None)
        .project_config_file(None)
        .environment(Vec::<(String, String)>::new())
}

/// An `azure_core` transport on hyper and rustls that trusts one CA (the fakes' generated one):
/// `azure_identity` insists on an HTTPS authority, and Karu's build of `azure_core` carries no
/// HTTP client of its own.
mod transport {
    use azure_core::http::headers::{HeaderName, HeaderValue, Headers};
    use azure_core::http::{AsyncRawResponse, HttpClient, Request, StatusCode};
    use bytes::Bytes;
    use http_body_util::{BodyExt, Full};
    use hyper_util::client::legacy::Client;
    use hyper_util::client::legacy::connect::HttpConnector;
    use hyper_util::rt::TokioExecutor;
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;

    #[derive(Debug)]
    pub(super) struct Trusting {
        client: Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>,
    }

    impl Trusting {
        pub(super) fn new(ca_pem: &str) -> Self {
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
                roots.add(cert.unwrap()).unwrap();
            }
            let tls = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
                rustls::crypto::aws_lc_rs::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
            let connector = hyper_rustls::HttpsConnectorBuilder::new()
                .with_tls_config(tls)
                .https_only()
                .enable_http1()
                .build();
            Trusting {
                client: Client::builder(TokioExecutor::new()).build(connector),
            }
        }
    }

    #[async_trait::async_trait]
    impl HttpClient for Trusting {
        async fn execute_request(&self, request: &Request) -> azure_core::Result<AsyncRawResponse> {
            let failed = |e: &dyn std::fmt::Display| {
                azure_core::Error::with_message(azure_core::error::ErrorKind::Io, e.to_string())
            };
            let mut builder = http::Request::builder()
                .method(request.method().as_ref())
                .uri(request.url().as_str());
            for (name, value) in request.headers().iter() {
                builder = builder.header(name.as_str(), value.as_str());
            }
            let body = Bytes::from(request.body());
            let response = self
                .client
                .request(builder.body(Full::new(body)).map_err(|e| failed(&e))?)
                .await
                .map_err(|e| failed(&e))?;
            let status = StatusCode::from(response.status().as_u16());
            let mut headers = Headers::new();
            for (name, value) in response.headers() {
                if let Ok(value) = value.to_str() {
                    headers.insert(
                        HeaderName::from(name.as_str().to_owned()),
                        HeaderValue::from(value.to_owned()),
                    );
                }
            }
            let body = response
                .into_body()
                .collect()
                .await
                .map_err(|e| failed(&e))?
                .to_bytes();
            Ok(AsyncRawResponse::from_bytes(status, headers, body))
        }
    }
}

#[test]
fn an_azure_identity_client_secret_credential_reads_from_the_azure_mock() {
    let mock = AzureMock::start();
    mock.insert("data", "a.bin", pattern(0, 1000));
    mock.insert("data", "b.bin", pattern(0, 1000));
    let fakes = mock.identity_fakes_over_tls();
    fakes.add_client_secret(TENANT, "app-1", "s3cret~value");
    let ca = std::fs::read_to_string(fakes.ca_file().unwrap()).unwrap();

    let mut cloud = azure_core::cloud::CustomConfiguration::default();
    cloud.authority_host = fakes.authority_host();
    let options = azure_identity::ClientSecretCredentialOptions {
        client_options: azure_core::http::ClientOptions {
            transport: Some(azure_core::http::Transport::new(Arc::new(
                transport::Trusting::new(&ca),
            ))),
            cloud: Some(Arc::new(cloud.into())),
            ..Default::default()
        },
    };
    let credential = azure_identity::ClientSecretCredential::new(
        TENANT,
        "app-1".into(),
        "s3cret~value".into(),
        Some(options),
    )
    .unwrap();

    let client = isolated()
        .set("azure.endpoint", mock.endpoint())
        .azure_token_credential("az://data", credential)
        .build()
        .unwrap();
    for name in ["a.bin", "b.bin"] {
        let object = client.locate(&format!("az://data/{name}")).unwrap();
        assert_eq!(client.read(&object, 100, 50).unwrap(), pattern(100, 50));
    }
    let identities: Vec<Identity> = mock
        .take_auth_log()
        .into_iter()
        .map(|r| r.identity)
        .collect();
    let sp = Identity::Bearer {
        identity: "sp:app-1".into(),
    };
    assert_eq!(identities, [sp.clone(), sp]);
    // One token for both objects: cached under the prefix.
    assert_eq!(
        fakes.calls(),
        [TokenCall::ClientSecret {
            client_id: "app-1".into()
        }]
    );
    assert_eq!(client.credential_stats().callback_calls, 1);
}

/// A `gcp_auth` token provider of the application's own: tokens the GCS mock knows, one per
/// call, each said to live an hour.
#[derive(Debug, Default)]
struct Issuer {
    calls: AtomicUsize,
    mock_tokens: Vec<String>,
}

#[async_trait::async_trait]
impl gcp_auth::TokenProvider for Issuer {
    async fn token(&self, scopes: &[&str]) -> Result<Arc<gcp_auth::Token>, gcp_auth::Error> {
        assert_eq!(
            scopes,
            ["https://www.googleapis.com/auth/devstorage.read_only"]
        );
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        let token = &self.mock_tokens[n.min(self.mock_tokens.len() - 1)];
        let answer = serde_json::json!({ "access_token": token, "expires_in": 3600 });
        Ok(Arc::new(serde_json::from_value(answer).unwrap()))
    }

    async fn project_id(&self) -> Result<Arc<str>, gcp_auth::Error> {
        Ok(Arc::from("karu-test"))
    }
}

#[test]
fn a_gcp_auth_token_provider_reads_from_the_gcs_mock() {
    let gcs = GcsMock::start();
    gcs.insert("bkt", "a.bin", pattern(0, 1000));
    gcs.insert("bkt", "b.bin", pattern(0, 1000));
    gcs.add_token("ya29.first", "adapter:first");
    gcs.add_token("ya29.second", "adapter:second");
    let issuer = Arc::new(Issuer {
        mock_tokens: vec!["ya29.first".into(), "ya29.second".into()],
        ..Issuer::default()
    });
    let client = isolated()
        .set("gcs.endpoint", gcs.endpoint())
        .gcp_token_provider("gs://bkt", issuer.clone())
        .build()
        .unwrap();
    let a = client.locate("gs://bkt/a.bin").unwrap();
    let b = client.locate("gs://bkt/b.bin").unwrap();
    assert_eq!(client.read(&a, 0, 100).unwrap(), pattern(0, 100));
    assert_eq!(client.read(&b, 900, 100).unwrap(), pattern(900, 100));
    assert_eq!(
        issuer.calls.load(Ordering::SeqCst),
        1,
        "cached under gs://bkt"
    );
    // A revoked token: the 401 drops it, and the provider is asked once more.
    gcs.revoke_token("ya29.first");
    assert_eq!(client.read(&a, 10, 10).unwrap(), pattern(10, 10));
    assert_eq!(issuer.calls.load(Ordering::SeqCst), 2);
    let identities: Vec<String> = gcs
        .authenticated()
        .into_iter()
        .map(|a| a.identity)
        .collect();
    assert_eq!(
        identities,
        ["adapter:first", "adapter:first", "adapter:second"]
    );
}

/// The application's `gcp_auth::TokenProvider` of tokens the GCS mock knows, counting calls.
#[derive(Debug)]
struct Counting {
    calls: AtomicUsize,
    token: String,
}

#[async_trait::async_trait]
impl gcp_auth::TokenProvider for Counting {
    async fn token(&self, _scopes: &[&str]) -> Result<Arc<gcp_auth::Token>, gcp_auth::Error> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let answer = serde_json::json!({ "access_token": self.token, "expires_in": 3600 });
        Ok(Arc::new(serde_json::from_value(answer).unwrap()))
    }

    async fn project_id(&self) -> Result<Arc<str>, gcp_auth::Error> {
        Ok(Arc::from("karu-test"))
    }
}

/// An `azure_core` credential issuing tokens the Azure mock accepts, counting calls.
#[derive(Debug)]
struct AzureCounting {
    calls: AtomicUsize,
    token: String,
}

#[async_trait::async_trait]
impl azure_core::credentials::TokenCredential for AzureCounting {
    async fn get_token(
        &self,
        _scopes: &[&str],
        _options: Option<azure_core::credentials::TokenRequestOptions<'_>>,
    ) -> azure_core::Result<azure_core::credentials::AccessToken> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let expires =
            azure_core::time::OffsetDateTime::now_utc() + std::time::Duration::from_secs(3600);
        Ok(azure_core::credentials::AccessToken::new(
            self.token.clone(),
            expires,
        ))
    }
}

#[test]
fn an_adapter_answers_only_for_the_paths_under_its_prefix() {
    // An adapter given for one bucket: a read of another bucket of the family is not its to
    // authenticate. It fails with Credentials, naming the adapter's prefix, without asking the
    // adapter, and nothing reaches storage.
    let gcs = GcsMock::start();
    gcs.insert("bkt", "a.bin", pattern(0, 1000));
    gcs.insert("other", "a.bin", pattern(0, 1000));
    gcs.add_token("ya29.adapter", "adapter");
    let provider = Arc::new(Counting {
        calls: AtomicUsize::new(0),
        token: "ya29.adapter".into(),
    });
    let client = isolated()
        .set("gcs.endpoint", gcs.endpoint())
        .gcp_token_provider("gs://bkt", provider.clone())
        .build()
        .unwrap();
    let other = client.locate("gs://other/a.bin").unwrap();
    for _ in 0..2 {
        let error = client.read(&other, 0, 10).unwrap_err();
        assert_eq!(error.status(), karu::Status::Credentials, "{error}");
        assert!(error.message().contains("gs://bkt"), "{error}");
    }
    assert_eq!(provider.calls.load(Ordering::SeqCst), 0);
    assert!(gcs.authenticated().is_empty());
    // Under the prefix: one call, cached.
    let object = client.locate("gs://bkt/a.bin").unwrap();
    assert_eq!(client.read(&object, 0, 10).unwrap(), pattern(0, 10));
    assert_eq!(client.read(&object, 10, 10).unwrap(), pattern(10, 10));
    assert_eq!(provider.calls.load(Ordering::SeqCst), 1);

    let mock = AzureMock::start();
    mock.insert("data", "a.bin", pattern(0, 1000));
    mock.insert("other", "a.bin", pattern(0, 1000));
    let credential = Arc::new(AzureCounting {
        calls: AtomicUsize::new(0),
        token: mock.issue_token("adapter", std::time::Duration::from_secs(3600)),
    });
    let client = isolated()
        .set("azure.endpoint", mock.endpoint())
        .azure_token_credential("az://data", credential.clone())
        .build()
        .unwrap();
    let other = client.locate("az://other/a.bin").unwrap();
    for _ in 0..2 {
        let error = client.read(&other, 0, 10).unwrap_err();
        assert_eq!(error.status(), karu::Status::Credentials, "{error}");
        assert!(error.message().contains("az://data"), "{error}");
    }
    assert_eq!(credential.calls.load(Ordering::SeqCst), 0);
    assert!(mock.take_auth_log().is_empty());
    let object = client.locate("az://data/a.bin").unwrap();
    assert_eq!(client.read(&object, 0, 10).unwrap(), pattern(0, 10));
    assert_eq!(credential.calls.load(Ordering::SeqCst), 1);
}

/// Tells a channel when it is dropped: a lookup's future that was cancelled.
struct Dropped(std::sync::Mutex<std::sync::mpsc::Sender<()>>);

impl Drop for Dropped {
    fn drop(&mut self) {
        let _ = self.0.lock().unwrap().send(());
    }
}

/// Credentials that never come: each call waits forever, and says when it was given up.
#[derive(Debug)]
struct Never(std::sync::Mutex<std::sync::mpsc::Sender<()>>);

impl Never {
    fn new() -> (Arc<Never>, std::sync::mpsc::Receiver<()>) {
        let (tx, rx) = std::sync::mpsc::channel();
        (Arc::new(Never(std::sync::Mutex::new(tx))), rx)
    }

    async fn wait(&self) {
        let _dropped = Dropped(std::sync::Mutex::new(self.0.lock().unwrap().clone()));
        std::future::pending::<()>().await;
    }
}

#[async_trait::async_trait]
impl gcp_auth::TokenProvider for Never {
    async fn token(&self, _scopes: &[&str]) -> Result<Arc<gcp_auth::Token>, gcp_auth::Error> {
        self.wait().await;
        unreachable!()
    }

    async fn project_id(&self) -> Result<Arc<str>, gcp_auth::Error> {
        Ok(Arc::from("karu-test"))
    }
}

#[async_trait::async_trait]
impl azure_core::credentials::TokenCredential for Never {
    async fn get_token(
        &self,
        _scopes: &[&str],
        _options: Option<azure_core::credentials::TokenRequestOptions<'_>>,
    ) -> azure_core::Result<azure_core::credentials::AccessToken> {
        self.wait().await;
        unreachable!()
    }
}

#[test]
fn an_adapters_lookup_ends_at_the_reads_deadline() {
    // A credential that never answers: the read fails at its deadline, and the lookup is
    // given up then too (not after a fixed limit of its own, holding a credential worker and
    // every later read of the family meanwhile).
    let gcs = GcsMock::start();
    gcs.insert("bkt", "a.bin", pattern(0, 1000));
    let (never, dropped) = Never::new();
    let client = isolated()
        .set("gcs.endpoint", gcs.endpoint())
        .set("retry.deadline", "300ms")
        .gcp_token_provider("gs://bkt", never)
        .build()
        .unwrap();
    let object = client.locate("gs://bkt/a.bin").unwrap();
    let error = client.read(&object, 0, 10).unwrap_err();
    assert_eq!(error.status(), karu::Status::TimedOut, "{error}");
    dropped
        .recv_timeout(karu_testkit::reads::PATIENCE)
        .expect("the gcp_auth lookup is given up at the read's deadline");

    let mock = AzureMock::start();
    mock.insert("data", "a.bin", pattern(0, 1000));
    let (never, dropped) = Never::new();
    let client = isolated()
        .set("azure.endpoint", mock.endpoint())
        .set("retry.deadline", "300ms")
        .azure_token_credential("az://data", never)
        .build()
        .unwrap();
    let object = client.locate("az://data/a.bin").unwrap();
    let error = client.read(&object, 0, 10).unwrap_err();
    assert_eq!(error.status(), karu::Status::TimedOut, "{error}");
    dropped
        .recv_timeout(karu_testkit::reads::PATIENCE)
        .expect("the azure_core lookup is given up at the read's deadline");
}
