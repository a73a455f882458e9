//! A service principal whose Entra ID authority is HTTPS behind a private CA: with the CA in
//! `http.ca_file` the client-secret exchange goes through the client's own HTTP client and the
//! read succeeds; without it the read fails with `Credentials`, its cause the certificate
//! rustls refused (an unknown issuer), and nothing reaches storage.

use karu::{Client, ClientBuilder, Status};
use karu_testkit::azure::{IdentityFakes, TokenCall};
use karu_testkit::reads::rustls_cause;
use karu_testkit::{AzureMock, Identity, pattern};

const TENANT: &str = "72f988bf-0000-0000-0000-000000000001";

/// A mock holding `az://data/a.bin`, its identity fakes over TLS knowing one client secret,
/// and a client reading no file of the machine that authenticates with it.
fn setup() -> (AzureMock, IdentityFakes, ClientBuilder) {
    let mock = AzureMock::start();
    mock.insert("data", "a.bin", pattern(0, 1000));
    let fakes = mock.identity_fakes_over_tls();
    assert!(fakes.authority_host().starts_with("https://"));
    fakes.add_client_secret(TENANT, "app-1", "s3cret~value");
    let builder = Client::builder()
        .user_config_file(None)
        .project_config_file(None)
        .environment([
            ("AZURE_TENANT_ID", TENANT.to_string()),
            ("AZURE_CLIENT_ID", "app-1".to_string()),
            ("AZURE_CLIENT_SECRET", "s3cret~value".to_string()),
            ("AZURE_AUTHORITY_HOST", fakes.authority_host()),
        ])
        .set("azure.endpoint", mock.endpoint());
    (mock, fakes, builder)
}

#[test]
fn a_client_secret_behind_a_private_ca_reads_with_http_ca_file() {
    let (mock, fakes, builder) = setup();
    let ca = fakes.ca_file().unwrap();
    let client = builder
        .set("http.ca_file", ca.to_string_lossy().as_ref())
        .build()
        .unwrap();
    let object = client.locate("az://data/a.bin").unwrap();
    assert_eq!(client.read(&object, 10, 90).unwrap(), pattern(10, 90));
    assert_eq!(client.read(&object, 500, 20).unwrap(), pattern(500, 20));
    let identities: Vec<Identity> = mock
        .take_auth_log()
        .into_iter()
        .map(|r| r.identity)
        .collect();
    let sp = Identity::Bearer {
        identity: "sp:app-1".into(),
    };
    assert_eq!(identities, [sp.clone(), sp]);
    assert_eq!(
        fakes.calls(),
        [TokenCall::ClientSecret {
            client_id: "app-1".into()
        }]
    );
}

#[test]
fn without_the_ca_the_exchange_fails_naming_the_untrusted_certificate() {
    let (mock, fakes, builder) = setup();
    let client = builder.build().unwrap();
    let object = client.locate("az://data/a.bin").unwrap();
    let error = client.read(&object, 0, 10).unwrap_err();
    assert_eq!(error.status(), Status::Credentials, "{error}");
    assert_eq!(
        rustls_cause(&error),
        Some(rustls::Error::InvalidCertificate(
            rustls::CertificateError::UnknownIssuer
        )),
        "{error}"
    );
    assert!(!error.to_string().contains("s3cret"), "{error}");
    // The handshake failed: the fakes issued nothing, storage saw nothing.
    assert!(fakes.calls().is_empty());
    assert!(mock.take_auth_log().is_empty());
}
