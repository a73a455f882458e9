//! Token credentials through the Azure mock and its identity fakes on loopback: each source
//! (service principal with a client secret, workload identity, managed identity on IMDS and on
//! App Service) is checked by the identity the mock saw on every request, the token's expiry
//! travels into the cache, and a refused exchange is a `Credentials` error without the secret.

use karu::{Client, ClientBuilder, Status};
use karu_testkit::azure::TokenCall;
use karu_testkit::{AuthFailure, AzureMock, Identity, pattern};

const TENANT: &str = "72f988bf-0000-0000-0000-000000000001";

fn builder(mock: &AzureMock, env: &[(&str, String)]) -> ClientBuilder {
    Client::builder()
        .user_config_file(None)
        .project_config_file(None)
        .environment(env.iter().map(|(k, v)| (k.to_string(), v.clone())))
        .set("azure.endpoint", mock.endpoint())
}

fn bearer(identity: &str) -> (Identity, Option<AuthFailure>) {
    (
        Identity::Bearer {
            identity: identity.into(),
        },
        None,
    )
}

fn read_twice(client: &Client) {
    for name in ["a.bin", "b.bin"] {
        let object = client.locate(&format!("az://data/{name}")).unwrap();
        assert_eq!(client.read(&object, 5, 10).unwrap(), pattern(5, 10));
    }
}

fn identities(mock: &AzureMock) -> Vec<(Identity, Option<AuthFailure>)> {
    mock.take_auth_log()
        .into_iter()
        .map(|r| (r.identity, r.failure))
        .collect()
}

fn start() -> AzureMock {
    let mock = AzureMock::start();
    mock.insert("data", "a.bin", pattern(0, 100));
    mock.insert("data", "b.bin", pattern(0, 100));
    mock
}

#[test]
fn a_service_principal_secret_from_the_environment() {
    let mock = start();
    let fakes = mock.identity_fakes();
    fakes.add_client_secret(TENANT, "app-1", "s3cret~value");
    let env = [
        ("AZURE_TENANT_ID", TENANT.to_string()),
        ("AZURE_CLIENT_ID", "app-1".to_string()),
        ("AZURE_CLIENT_SECRET", "s3cret~value".to_string()),
        ("AZURE_AUTHORITY_HOST", fakes.authority_host()),
    ];
    let client = builder(&mock, &env).build().unwrap();
    read_twice(&client);
    assert_eq!(identities(&mock), [bearer("sp:app-1"), bearer("sp:app-1")]);
    // One exchange for the scope; the second read is served from the cache.
    assert_eq!(
        fakes.calls(),
        [TokenCall::ClientSecret {
            client_id: "app-1".into()
        }]
    );
    assert_eq!(client.credential_stats().lookups, 1);

    // A wrong secret: Credentials, the secret never shown, nothing sent to storage.
    let env = [
        ("AZURE_TENANT_ID", TENANT.to_string()),
        ("AZURE_CLIENT_ID", "app-1".to_string()),
        ("AZURE_CLIENT_SECRET", "wrong-s3cret".to_string()),
        ("AZURE_AUTHORITY_HOST", fakes.authority_host()),
    ];
    let client = builder(&mock, &env).build().unwrap();
    let object = client.locate("az://data/a.bin").unwrap();
    let error = client.read(&object, 0, 10).unwrap_err();
    assert_eq!(error.status(), Status::Credentials, "{error}");
    assert!(error.message().contains("AADSTS7000215"), "{error}");
    assert!(!error.to_string().contains("wrong-s3cret"), "{error}");
    assert!(identities(&mock).is_empty());
}

#[test]
fn a_workload_identity_from_the_section() {
    let mock = start();
    let fakes = mock.identity_fakes();
    fakes.add_federated_token(TENANT, "wl-2", "eyJhbGciOi.federated.token");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("token");
    std::fs::write(&file, "eyJhbGciOi.federated.token\n").unwrap();
    let client = builder(&mock, &[])
        .set("azure.tenant_id", TENANT)
        .set("azure.client_id", "wl-2")
        .set(
            "azure.federated_token_file",
            file.to_string_lossy().as_ref(),
        )
        .set("azure.authority_host", fakes.authority_host())
        .build()
        .unwrap();
    read_twice(&client);
    assert_eq!(
        identities(&mock),
        [bearer("workload:wl-2"), bearer("workload:wl-2")]
    );
    assert_eq!(
        fakes.calls(),
        [TokenCall::ClientAssertion {
            client_id: "wl-2".into()
        }]
    );
}

#[test]
fn managed_identities_on_imds_and_app_service() {
    let mock = start();
    let fakes = mock.identity_fakes();
    let client = builder(&mock, &[])
        .set("azure.use_managed_identity", true)
        .set("azure.client_id", "uai-3")
        .set("azure.msi_endpoint", fakes.imds_endpoint())
        .build()
        .unwrap();
    read_twice(&client);
    assert_eq!(
        identities(&mock),
        [bearer("imds:uai-3"), bearer("imds:uai-3")]
    );
    assert_eq!(fakes.calls(), [TokenCall::Imds]);

    fakes.set_app_service_header("x-id-h3ader");
    let env = [
        ("IDENTITY_ENDPOINT", fakes.app_service_endpoint()),
        ("IDENTITY_HEADER", "x-id-h3ader".to_string()),
    ];
    let client = builder(&mock, &env).build().unwrap();
    read_twice(&client);
    assert_eq!(
        identities(&mock),
        [bearer("appservice:system"), bearer("appservice:system")]
    );
    assert_eq!(fakes.calls()[1..], [TokenCall::AppService]);
}

#[test]
fn an_expired_token_is_exchanged_again_once() {
    let mock = start();
    let fakes = mock.identity_fakes();
    fakes.add_client_secret(TENANT, "app-1", "s3cret");
    let client = builder(&mock, &[])
        .set("azure.tenant_id", TENANT)
        .set("azure.client_id", "app-1")
        .set("azure.client_secret", "s3cret")
        .set("azure.authority_host", fakes.authority_host())
        .build()
        .unwrap();
    let object = client.locate("az://data/a.bin").unwrap();
    assert_eq!(client.read(&object, 0, 10).unwrap(), pattern(0, 10));
    // The service says the cached token expired: one more exchange, one retried request.
    mock.expire_tokens();
    assert_eq!(client.read(&object, 0, 10).unwrap(), pattern(0, 10));
    let log = identities(&mock);
    assert_eq!(
        log,
        [
            bearer("sp:app-1"),
            (
                Identity::Bearer {
                    identity: "sp:app-1".into()
                },
                Some(AuthFailure::ExpiredToken)
            ),
            bearer("sp:app-1"),
        ]
    );
    assert_eq!(fakes.calls().len(), 2);
}

#[test]
fn a_service_principal_certificate() {
    let mock = start();
    let fakes = mock.identity_fakes();
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_RSA_SHA256).unwrap();
    let cert = rcgen::CertificateParams::new(vec!["karu-client".into()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    fakes.add_client_certificate(TENANT, "app-cert", cert.der());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("client.pem");
    std::fs::write(&file, format!("{}{}", cert.pem(), key.serialize_pem())).unwrap();
    let env = [
        ("AZURE_TENANT_ID", TENANT.to_string()),
        ("AZURE_CLIENT_ID", "app-cert".to_string()),
        (
            "AZURE_CLIENT_CERTIFICATE_PATH",
            file.to_string_lossy().into_owned(),
        ),
        ("AZURE_AUTHORITY_HOST", fakes.authority_host()),
    ];
    let client = builder(&mock, &env).build().unwrap();
    read_twice(&client);
    assert_eq!(
        identities(&mock),
        [bearer("cert:app-cert"), bearer("cert:app-cert")]
    );
    assert_eq!(
        fakes.calls(),
        [TokenCall::ClientCertificate {
            client_id: "app-cert".into()
        }]
    );

    // Another key for the same certificate's client: refused by the endpoint.
    let other = rcgen::KeyPair::generate_for(&rcgen::PKCS_RSA_SHA256).unwrap();
    std::fs::write(&file, format!("{}{}", cert.pem(), other.serialize_pem())).unwrap();
    let client = builder(&mock, &env).build().unwrap();
    let object = client.locate("az://data/a.bin").unwrap();
    let error = client.read(&object, 0, 10).unwrap_err();
    assert_eq!(error.status(), Status::Credentials, "{error}");
    assert!(error.message().contains("AADSTS700027"), "{error}");
    assert!(identities(&mock).is_empty());
}

/// The statuses the identity fakes' server answered, in order.
fn token_statuses(fakes: &karu_testkit::azure::IdentityFakes) -> Vec<u16> {
    fakes.server().requests().iter().map(|r| r.status).collect()
}

#[test]
fn an_entra_id_or_managed_identity_exchange_that_meets_a_429_a_5xx_or_a_reset_is_tried_again() {
    use karu_testkit::{Fault, FaultRule};
    let status = |code: u16, retry_after: Option<&str>| Fault::Status {
        code,
        retry_after: retry_after.map(str::to_string),
    };
    // The fault, the statuses of the token requests, and the calls the endpoints answered (a
    // status fault answers in their place; a reset cuts an answer of theirs).
    for (fault, answered, calls) in [
        // Entra ID throttles with 429 and a Retry-After.
        (status(429, Some("0")), vec![429, 200], 1),
        (status(503, None), vec![503, 200], 1),
        (Fault::ResetAfter(0), vec![200, 200], 2),
    ] {
        // A service principal's secret (a POST to the tenant's token endpoint).
        let mock = start();
        let fakes = mock.identity_fakes();
        fakes.add_client_secret(TENANT, "app-1", "s3cret");
        fakes
            .server()
            .add_fault(FaultRule::new(fault.clone()).times(1));
        let client = builder(&mock, &[])
            .set("azure.tenant_id", TENANT)
            .set("azure.client_id", "app-1")
            .set("azure.client_secret", "s3cret")
            .set("azure.authority_host", fakes.authority_host())
            .set("retry.initial_backoff", "10ms")
            .build()
            .unwrap();
        read_twice(&client);
        assert_eq!(token_statuses(&fakes), answered, "{fault:?}");
        assert_eq!(
            identities(&mock),
            [bearer("sp:app-1"), bearer("sp:app-1")],
            "{fault:?}"
        );

        // A managed identity on IMDS (a GET).
        let mock = start();
        let fakes = mock.identity_fakes();
        fakes
            .server()
            .add_fault(FaultRule::new(fault.clone()).times(1));
        let client = builder(&mock, &[])
            .set("azure.use_managed_identity", true)
            .set("azure.msi_endpoint", fakes.imds_endpoint())
            .set("retry.initial_backoff", "10ms")
            .build()
            .unwrap();
        read_twice(&client);
        assert_eq!(token_statuses(&fakes), answered, "{fault:?}");
        assert_eq!(fakes.calls(), vec![TokenCall::Imds; calls], "{fault:?}");
    }
}

#[test]
fn a_refused_entra_id_exchange_is_not_tried_again() {
    use karu_testkit::{Fault, FaultRule};
    let mock = start();
    let fakes = mock.identity_fakes();
    fakes.add_client_secret(TENANT, "app-1", "s3cret");
    fakes.server().add_fault(
        FaultRule::new(Fault::Status {
            code: 401,
            retry_after: None,
        })
        .times(1),
    );
    let client = builder(&mock, &[])
        .set("azure.tenant_id", TENANT)
        .set("azure.client_id", "app-1")
        .set("azure.client_secret", "s3cret")
        .set("azure.authority_host", fakes.authority_host())
        .build()
        .unwrap();
    let object = client.locate("az://data/a.bin").unwrap();
    let error = client.read(&object, 0, 10).unwrap_err();
    assert_eq!(error.status(), Status::Credentials, "{error}");
    assert_eq!(token_statuses(&fakes), [401]);
    assert!(identities(&mock).is_empty());
}
