//! A service account whose token endpoint is HTTPS behind a private CA: with the CA in
//! `http.ca_file` the exchange goes through the client's own HTTP client and the read
//! succeeds; without it the read fails with `Credentials`, its cause the certificate rustls
//! refused (an unknown issuer), and nothing reaches storage.

use karu::{Client, ClientBuilder, Status};
use karu_testkit::gcs::{GcsAuthFakes, GcsMock};
use karu_testkit::pattern;
use karu_testkit::reads::rustls_cause;

const BUCKET: &str = "bkt";

/// A mock holding `gs://bkt/a.bin`, its token endpoint over TLS, and a client reading no file
/// of the machine whose service account's `token_uri` is that endpoint.
fn setup() -> (GcsMock, GcsAuthFakes, tempfile::TempDir, ClientBuilder) {
    let gcs = GcsMock::start();
    gcs.insert(BUCKET, "a.bin", pattern(0, 1000));
    let fakes = gcs.start_auth_fakes_over_tls();
    assert!(fakes.token_uri().starts_with("https://"));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sa.json");
    std::fs::write(&file, fakes.add_service_account("reader@karu.iam")).unwrap();
    let builder = Client::builder()
        .user_config_file(None)
        .project_config_file(None)
        .environment([("GCE_METADATA_HOST", "127.0.0.1:9")])
        .set("gcs.endpoint", gcs.endpoint())
        .set("gcs.credentials_file", file.to_string_lossy().as_ref());
    (gcs, fakes, dir, builder)
}

#[test]
fn a_service_account_behind_a_private_ca_reads_with_http_ca_file() {
    let (gcs, fakes, _dir, builder) = setup();
    let ca = fakes.ca_file().unwrap();
    let client = builder
        .set("http.ca_file", ca.to_string_lossy().as_ref())
        .build()
        .unwrap();
    let object = client.locate(&format!("gs://{BUCKET}/a.bin")).unwrap();
    assert_eq!(client.read(&object, 10, 90).unwrap(), pattern(10, 90));
    assert_eq!(client.read(&object, 500, 20).unwrap(), pattern(500, 20));
    let identities: Vec<String> = gcs
        .authenticated()
        .into_iter()
        .map(|a| a.identity)
        .collect();
    assert_eq!(
        identities,
        [
            "service-account:reader@karu.iam",
            "service-account:reader@karu.iam"
        ]
    );
    let calls = fakes.calls();
    assert_eq!((calls.service_account, calls.refused), (1, 0));
    // The exchange went over TLS to the fakes' server: one POST of the token endpoint.
    let posts = fakes
        .server()
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST" && r.path == "/token")
        .count();
    assert_eq!(posts, 1);
}

#[test]
fn without_the_ca_the_exchange_fails_naming_the_untrusted_certificate() {
    let (gcs, fakes, _dir, builder) = setup();
    let client = builder.build().unwrap();
    let object = client.locate(&format!("gs://{BUCKET}/a.bin")).unwrap();
    let error = client.read(&object, 0, 10).unwrap_err();
    assert_eq!(error.status(), Status::Credentials, "{error}");
    assert_eq!(
        rustls_cause(&error),
        Some(rustls::Error::InvalidCertificate(
            rustls::CertificateError::UnknownIssuer
        )),
        "{error}"
    );
    // The handshake failed: the fakes issued nothing, storage saw nothing.
    assert_eq!(fakes.calls().service_account, 0);
    assert!(gcs.authenticated().is_empty());
}
