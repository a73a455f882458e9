//! The Azure provider against the testkit's Azure mock: the conformance suite (the fault
//! matrix included) with Shared Key checked on every request, each credential source with the
//! identity the mock saw, read_ends without suffix ranges on the wire, and answers that are
//! refused.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use karu::{CallbackCredential, CanonicalPath, Client, ClientBuilder, Status};
use karu_testkit::azure::Sas;
use karu_testkit::conformance::{self, AzureMockTarget, Options};
use karu_testkit::{
    AuthFailure, AzureMock, Fault, FaultRule, GateResponse, Identity, RequestHead, Route, pattern,
};

fn isolated() -> ClientBuilder {
    Client::builder()
        .user_config_file(None)
        .project_config_file(None)
        .environment(Vec::<(String, String)>::new())
}

/// A client reaching `mock` with no credential configured.
fn at(mock: &AzureMock) -> ClientBuilder {
    isolated().set("azure.endpoint", mock.endpoint())
}

fn shared_key() -> Identity {
    Identity::SharedKey {
        account: "devstoreaccount1".into(),
    }
}

/// The identities the mock saw, and whether it accepted each.
fn identities(mock: &AzureMock) -> Vec<(Identity, Option<AuthFailure>)> {
    mock.take_auth_log()
        .into_iter()
        .map(|r| (r.identity, r.failure))
        .collect()
}

fn read_10(client: &Client, address: &str) -> Result<Vec<u8>, karu::Error> {
    let object = client.locate(address)?;
    client.read(&object, 5, 10)
}

#[test]
fn the_azure_provider_conforms_on_its_mock() {
    let target = AzureMockTarget::start();
    let report = conformance::run(&target, &Options::default().seeds_from_env());
    println!("{report}");
    report.assert_passed();
    let log = target.mock_azure().auth_log();
    assert!(!log.is_empty());
    assert!(
        log.iter()
            .all(|r| r.failure.is_none() && r.identity == shared_key()),
        "every request was signed with the account key and accepted"
    );
}

#[test]
fn read_ends_reads_the_tail_after_the_head_pinned_to_its_etag() {
    let mock = AzureMock::start();
    mock.insert("data", "a.bin", pattern(0, 10_000));
    mock.set_etag("data", "a.bin", Some("\"0x8DC0FFEE\""));
    let client = at(&mock)
        .set("azure.account_key", mock.account_key())
        .set("azure.account", mock.account())
        .build()
        .unwrap();
    let object = client.locate("az://data/a.bin").unwrap();
    let ends = client.read_ends(&object, 100, 200).unwrap();
    assert_eq!(ends.head, pattern(0, 100));
    assert_eq!(ends.tail, pattern(9_800, 200));
    assert_eq!(ends.size, 10_000);
    let log = mock.server().take_requests();
    let ranges: Vec<_> = log.iter().map(|r| r.range.as_deref()).collect();
    assert_eq!(ranges, [Some("bytes=0-99"), Some("bytes=9800-9999")]);
    assert_eq!(log[0].header("if-match"), None);
    assert_eq!(log[1].header("if-match"), Some("\"0x8DC0FFEE\""));
    assert!(
        log.iter()
            .all(|r| r.header("x-ms-version") == Some("2023-11-03"))
    );

    // The blob changes between head and tail: the tail's If-Match fails.
    mock.server().add_fault(
        FaultRule::new(Fault::ChangeEtag)
            .path(mock.path("data", "a.bin"))
            .skip(1)
            .times(1),
    );
    let error = client.read_ends(&object, 100, 200).unwrap_err();
    assert_eq!(error.status(), Status::PreconditionFailed, "{error}");
    let log = mock.server().take_requests();
    assert_eq!(log.len(), 2, "{log:?}");
    assert_eq!(log[1].status, 412);
    assert!(
        log.iter()
            .all(|r| !r.range.as_deref().unwrap_or("").starts_with("bytes=-")),
        "no suffix range is ever sent: {log:?}"
    );
}

#[test]
fn every_credential_source_signs_as_its_identity() {
    let mock = AzureMock::start();
    mock.insert("data", "a.bin", pattern(0, 100));
    let expected = pattern(5, 10);

    // Account key from the configuration.
    let client = at(&mock)
        .set("azure.account", mock.account())
        .set("azure.account_key", mock.account_key())
        .build()
        .unwrap();
    assert_eq!(read_10(&client, "az://data/a.bin").unwrap(), expected);
    assert_eq!(identities(&mock), [(shared_key(), None)]);

    // A connection string from AZURE_STORAGE_CONNECTION_STRING names account, key, endpoint.
    let client = isolated()
        .environment([(
            "AZURE_STORAGE_CONNECTION_STRING".to_string(),
            mock.connection_string(),
        )])
        .build()
        .unwrap();
    assert_eq!(read_10(&client, "azure://data/a.bin").unwrap(), expected);
    assert_eq!(identities(&mock), [(shared_key(), None)]);

    // A SAS from the configuration, and one from a connection string.
    let sas = mock.sas_token("data", Duration::from_secs(3600));
    mock.server().take_requests();
    let client = at(&mock).set("azure.sas_token", &sas).build().unwrap();
    assert_eq!(read_10(&client, "az://data/a.bin").unwrap(), expected);
    let log = mock.server().take_requests();
    assert_eq!(log[0].query.as_deref(), Some(sas.as_str()));
    assert_eq!(log[0].header("authorization"), None);
    let client = isolated()
        .set(
            "azure.connection_string",
            format!(
                "BlobEndpoint={};SharedAccessSignature={sas}",
                mock.endpoint()
            ),
        )
        .build()
        .unwrap();
    assert_eq!(read_10(&client, "az://data/a.bin").unwrap(), expected);
    assert_eq!(
        identities(&mock),
        [(Identity::Sas, None), (Identity::Sas, None)]
    );

    // A SAS in the URL: no credential lookup at all, and the URL's query never shown.
    let client = at(&mock).build().unwrap();
    let url = format!("https://devstoreaccount1.blob.core.windows.net/data/a.bin?{sas}");
    let object = client.locate(&url).unwrap();
    assert!(!object.canonical().to_string().contains("sig="));
    assert!(!format!("{object:?}").contains("sig="));
    assert_eq!(client.read(&object, 5, 10).unwrap(), expected);
    assert_eq!(client.credential_stats().lookups, 0);
    assert_eq!(identities(&mock), [(Identity::Sas, None)]);

    // A bearer token from the configuration.
    let token = mock.issue_token("app-one", Duration::from_secs(3600));
    let client = at(&mock)
        .set("azure.account", mock.account())
        .set("azure.bearer_token", &token)
        .build()
        .unwrap();
    assert_eq!(read_10(&client, "az://data/a.bin").unwrap(), expected);
    assert_eq!(
        identities(&mock),
        [(
            Identity::Bearer {
                identity: "app-one".into()
            },
            None
        )]
    );

    // Anonymous reads of a public container; a private one is refused.
    let client = at(&mock).set("azure.anonymous", true).build().unwrap();
    let error = read_10(&client, "az://data/a.bin").unwrap_err();
    assert_eq!(error.http_status(), Some(401), "{error}");
    mock.set_public("data", true);
    assert_eq!(read_10(&client, "az://data/a.bin").unwrap(), expected);
    assert_eq!(
        identities(&mock),
        [
            (
                Identity::Anonymous,
                Some(AuthFailure::MissingAuthentication)
            ),
            (Identity::Anonymous, None)
        ]
    );
}

/// What the mock decided about each request: the identity and the failure.
type AuthLog = Vec<(Identity, Option<AuthFailure>)>;

/// Reads 10 bytes of `address` with `sas` from the configuration; the status of the read and
/// what the mock decided about each request.
fn read_with_sas(mock: &AzureMock, sas: &str, address: &str) -> (Result<Vec<u8>, Status>, AuthLog) {
    let client = at(mock).set("azure.sas_token", sas).build().unwrap();
    let result = read_10(&client, address).map_err(|error| {
        assert_eq!(error.http_status(), Some(403), "{error}");
        let sig = sas.split("sig=").nth(1).unwrap();
        assert!(!error.to_string().contains(sig), "{error}");
        error.status()
    });
    (result, identities(mock))
}

#[test]
fn sas_tokens_in_azures_formats_are_verified_on_the_mocks_clock() {
    let mock = AzureMock::start();
    mock.insert("data", "a.bin", pattern(0, 100));
    mock.insert("data", "b.bin", pattern(0, 100));
    mock.insert("other", "a.bin", pattern(0, 100));
    let hour = Duration::from_secs(3600);
    let later = mock.now() + hour;
    let accepted = |sas: &Sas, address: &str| {
        let (result, log) = read_with_sas(&mock, &mock.sas(sas), address);
        assert_eq!(result, Ok(pattern(5, 10)), "{sas:?} {address}");
        assert_eq!(log, [(Identity::Sas, None)], "{sas:?} {address}");
    };
    // A service SAS for the container, one for the blob, an account SAS for any container.
    accepted(&Sas::container("data", later), "az://data/a.bin");
    accepted(&Sas::blob("data", "a.bin", later), "az://data/a.bin");
    accepted(&Sas::account(later), "az://data/b.bin");
    accepted(&Sas::account(later), "az://other/a.bin");
    // Valid from five minutes ago, for 127.0.0.1, over either protocol.
    accepted(
        &Sas::container("data", later)
            .start(mock.now() - Duration::from_secs(300))
            .ip("127.0.0.1")
            .protocol("https,http"),
        "az://data/a.bin",
    );

    // Each refusal is a 403 for that read alone, PermissionDenied, one request, never retried.
    let refused = |sas: &Sas, address: &str, failure: AuthFailure| {
        let (result, log) = read_with_sas(&mock, &mock.sas(sas), address);
        assert_eq!(result, Err(Status::PermissionDenied), "{sas:?} {address}");
        assert_eq!(log, [(Identity::Sas, Some(failure))], "{sas:?} {address}");
    };
    let expired = Sas::container("data", mock.now() - Duration::from_secs(1));
    refused(&expired, "az://data/a.bin", AuthFailure::SasExpired);
    // For another container, or another blob: the signature is not the resource's.
    refused(
        &Sas::container("other", later),
        "az://data/a.bin",
        AuthFailure::SasMismatch,
    );
    refused(
        &Sas::blob("data", "b.bin", later),
        "az://data/a.bin",
        AuthFailure::SasMismatch,
    );
    // Without read permission; an account SAS without objects, or without the blob service.
    refused(
        &Sas::container("data", later).permissions("wl"),
        "az://data/a.bin",
        AuthFailure::SasPermission,
    );
    refused(
        &Sas::account(later).account_scope("b", "sc"),
        "az://data/a.bin",
        AuthFailure::SasResourceType,
    );
    refused(
        &Sas::account(later).account_scope("f", "sco"),
        "az://data/a.bin",
        AuthFailure::SasService,
    );
    // Not yet valid; HTTPS only (the mock is plain HTTP); from another address.
    refused(
        &Sas::container("data", later).start(mock.now() + Duration::from_secs(600)),
        "az://data/a.bin",
        AuthFailure::SasNotYetValid,
    );
    refused(
        &Sas::container("data", later).protocol("https"),
        "az://data/a.bin",
        AuthFailure::SasProtocol,
    );
    refused(
        &Sas::container("data", later).ip("10.0.0.1-10.0.0.255"),
        "az://data/a.bin",
        AuthFailure::SasSourceIp,
    );
    // A token signed with another key, and one whose expiry was moved after signing.
    let wrong_key = Sas::container("data", later).token(mock.account(), b"not the account key");
    let (result, log) = read_with_sas(&mock, &wrong_key, "az://data/a.bin");
    assert_eq!(result, Err(Status::PermissionDenied));
    assert_eq!(log, [(Identity::Sas, Some(AuthFailure::SasMismatch))]);
    let token = mock.sas(&Sas::container("data", later));
    let year = &token[token.find("se=").unwrap() + 3..][..4];
    let moved = token.replacen(
        &format!("se={year}"),
        &format!("se={}", year.parse::<u32>().unwrap() + 1),
        1,
    );
    let (result, log) = read_with_sas(&mock, &moved, "az://data/a.bin");
    assert_eq!(result, Err(Status::PermissionDenied));
    assert_eq!(log, [(Identity::Sas, Some(AuthFailure::SasMismatch))]);

    // The mock's clock decides: two hours ahead, a one-hour token has expired.
    let token = mock.sas_token("data", hour);
    assert_eq!(
        read_with_sas(&mock, &token, "az://data/a.bin").0,
        Ok(pattern(5, 10))
    );
    mock.set_clock_offset(7200);
    let (result, log) = read_with_sas(&mock, &token, "az://data/a.bin");
    assert_eq!(result, Err(Status::PermissionDenied));
    assert_eq!(log, [(Identity::Sas, Some(AuthFailure::SasExpired))]);
}

#[test]
fn without_a_credential_nothing_is_sent_and_a_wrong_key_is_refused_without_leaking_it() {
    let mock = AzureMock::start();
    mock.insert("data", "a.bin", pattern(0, 100));
    let client = at(&mock).build().unwrap();
    let error = read_10(&client, "az://data/a.bin").unwrap_err();
    assert_eq!(error.status(), Status::Credentials, "{error}");
    assert_eq!(mock.server().request_count(), 0);

    let wrong = "AAAAbm90IHRoZSBrZXkgb2YgdGhpcyBhY2NvdW50AAAA";
    let client = at(&mock)
        .set("azure.account", mock.account())
        .set("azure.account_key", wrong)
        .build()
        .unwrap();
    let error = read_10(&client, "az://data/a.bin").unwrap_err();
    assert_eq!(error.http_status(), Some(403), "{error}");
    assert!(!error.to_string().contains(wrong), "{error}");
    assert!(!format!("{client:?}").contains(wrong));
    let log = identities(&mock);
    assert!(!log.is_empty());
    assert!(
        log.iter()
            .all(|entry| *entry == (shared_key(), Some(AuthFailure::SignatureMismatch))),
        "{log:?}"
    );
}

#[test]
fn an_expired_bearer_token_is_replaced_once_through_the_callback() {
    let mock = Arc::new(AzureMock::start());
    mock.insert("data", "a.bin", pattern(0, 100));
    let calls = Arc::new(AtomicUsize::new(0));
    let (issuer, counter) = (mock.clone(), calls.clone());
    let client = at(&mock)
        .set("azure.account", mock.account())
        .credential_callback(karu_provider_azure::FAMILY, move |_: &CanonicalPath| {
            let n = counter.fetch_add(1, Ordering::SeqCst);
            let token = issuer.issue_token(&format!("caller-{n}"), Duration::from_secs(3600));
            let expires = SystemTime::now() + Duration::from_secs(3600);
            let credential = karu_provider_azure::bearer_credential(token, Some(expires));
            Ok(CallbackCredential::for_prefix(credential, "az://data"))
        })
        .build()
        .unwrap();
    assert_eq!(read_10(&client, "az://data/a.bin").unwrap(), pattern(5, 10));
    mock.expire_tokens();
    assert_eq!(read_10(&client, "az://data/a.bin").unwrap(), pattern(5, 10));
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    let bearer = |n: u32| Identity::Bearer {
        identity: format!("caller-{n}"),
    };
    assert_eq!(
        identities(&mock),
        [
            (bearer(0), None),
            (bearer(0), Some(AuthFailure::ExpiredToken)),
            (bearer(1), None)
        ]
    );
}

/// Answers every GET with what Azurite answers a suffix range: `206` and `NaN` offsets.
#[derive(Debug)]
struct NanRanges;

impl Route for NanRanges {
    fn respond(&self, request: &RequestHead) -> Option<GateResponse> {
        (request.method == "GET").then(|| {
            GateResponse::new(206, vec![0u8; 10])
                .header("content-range", "bytes NaN-NaN/100")
                .header("etag", "\"0x1\"")
        })
    }
}

#[test]
fn nan_ranges_are_protocol_errors() {
    let mock = AzureMock::start();
    mock.insert("data", "a.bin", pattern(0, 100));
    mock.server().set_route(Some(Arc::new(NanRanges)));
    let client = at(&mock)
        .set("azure.account", mock.account())
        .set("azure.account_key", mock.account_key())
        .build()
        .unwrap();
    let error = read_10(&client, "az://data/a.bin").unwrap_err();
    assert_eq!(error.status(), Status::Protocol, "{error}");
    let object = client.locate("az://data/a.bin").unwrap();
    let error = client.read_ends(&object, 10, 10).unwrap_err();
    assert_eq!(error.status(), Status::Protocol, "{error}");
}
