//! The GCS provider against the GCS mock and its token and metadata fakes: every credential
//! source and the order between them (each test checks, from the mock's log, which identity
//! made every request), the emulator host (read through the JSON API's media downloads),
//! requester pays, stored-gzip objects read exactly, transformed answers refused, and
//! `If-Match` on the ETag, on the XML API and on the JSON API alike.

use std::path::Path;

use karu::{Client, ClientBuilder, Read, Status};
use karu_testkit::gcs::{Decompression, GcsMock, media_path, object_path};
use karu_testkit::pattern;

const BUCKET: &str = "bkt";
const KEY: &str = "dir/a b+c%d/ü//x.bin";
const SIZE: u64 = 1 << 20;

/// The request path of an object (bucket, name) on one API.
type PathOf = fn(&str, &str) -> String;

/// The two APIs (`gcs.api`) and the request path of an object on each.
const APIS: [(&str, PathOf); 2] = [("xml", object_path), ("json", media_path)];

fn mock() -> GcsMock {
    let gcs = GcsMock::start();
    gcs.insert_virtual(BUCKET, KEY, SIZE);
    gcs
}

/// A client reading no file of the machine, with exactly this environment, for `mock`.
fn builder(gcs: &GcsMock, env: &[(&str, &str)]) -> ClientBuilder {
    Client::builder()
        .user_config_file(None)
        .project_config_file(None)
        .environment(env.iter().map(|(k, v)| (k.to_string(), v.to_string())))
        .set("gcs.endpoint", gcs.endpoint())
}

/// Two reads of the object (checked against the pattern); the identities that made the
/// requests the mock let through, deduplicated in order. Every request went to the object's
/// XML API path.
fn read_twice(gcs: &GcsMock, client: &Client) -> Vec<String> {
    read_twice_at(gcs, client, object_path)
}

/// [`read_twice`], every request to the object's path by `path_of` (the API's).
fn read_twice_at(gcs: &GcsMock, client: &Client, path_of: PathOf) -> Vec<String> {
    let object = client.locate(&format!("gs://{BUCKET}/{KEY}")).unwrap();
    assert_eq!(client.read(&object, 0, 100).unwrap(), pattern(0, 100));
    assert_eq!(
        client.read(&object, SIZE - 50, 50).unwrap(),
        pattern(SIZE - 50, 50)
    );
    assert_eq!(gcs.rejections(), vec![]);
    let mut identities: Vec<String> = Vec::new();
    for a in gcs.authenticated() {
        assert_eq!(a.path, path_of(BUCKET, KEY));
        if !identities.contains(&a.identity) {
            identities.push(a.identity);
        }
    }
    identities
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

/// A loopback address nothing listens on, for a metadata server that must not be reached.
fn dead_host() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

#[test]
fn a_static_token_authenticates_every_request() {
    let gcs = mock();
    gcs.add_token("ya29.static", "user:static");
    let client = builder(&gcs, &[])
        .set("gcs.token", "ya29.static")
        .build()
        .unwrap();
    assert_eq!(read_twice(&gcs, &client), ["user:static"]);
    let log = gcs.server().requests();
    assert_eq!(log.len(), 2);
    for r in &log {
        assert_eq!(r.header("authorization"), Some("Bearer ya29.static"));
        assert_eq!(r.header("accept-encoding"), Some("gzip"));
        assert_eq!(r.path, "/bkt/dir/a%20b%2Bc%25d/%C3%BC//x.bin");
    }
    assert_eq!(log[0].byte_range, Some((0, 99)));
}

#[test]
fn the_token_variable_is_a_static_token_and_the_configuration_beats_it() {
    let gcs = mock();
    gcs.add_token("ya29.env", "user:env");
    gcs.add_token("ya29.cfg", "user:cfg");
    let env = [("GOOGLE_OAUTH_ACCESS_TOKEN", "ya29.env")];
    let client = builder(&gcs, &env).build().unwrap();
    assert_eq!(read_twice(&gcs, &client), ["user:env"]);
    let gcs = mock();
    gcs.add_token("ya29.env", "user:env");
    gcs.add_token("ya29.cfg", "user:cfg");
    let client = builder(&gcs, &env)
        .set("gcs.token", "ya29.cfg")
        .build()
        .unwrap();
    assert_eq!(read_twice(&gcs, &client), ["user:cfg"]);
}

#[test]
fn hmac_keys_sign_every_request_and_a_wrong_secret_is_refused() {
    let gcs = mock();
    gcs.add_hmac_key("GOOG1EXAMPLEACCESSID", "hmac/secret+key");
    let client = builder(&gcs, &[])
        .set("gcs.hmac_access_id", "GOOG1EXAMPLEACCESSID")
        .set("gcs.hmac_secret", "hmac/secret+key")
        .set("gcs.user_project", "payer")
        .build()
        .unwrap();
    assert_eq!(read_twice(&gcs, &client), ["hmac:GOOG1EXAMPLEACCESSID"]);
    for r in gcs.server().requests() {
        let auth = r.header("authorization").unwrap();
        assert!(auth.starts_with("GOOG4-HMAC-SHA256 Credential=GOOG1EXAMPLEACCESSID/"));
        assert!(auth.contains("x-goog-user-project"), "{auth}");
    }

    let gcs = mock();
    gcs.add_hmac_key("GOOG1EXAMPLEACCESSID", "hmac/secret+key");
    let client = builder(&gcs, &[])
        .set("gcs.hmac_access_id", "GOOG1EXAMPLEACCESSID")
        .set("gcs.hmac_secret", "another secret")
        .build()
        .unwrap();
    let object = client.locate(&format!("gs://{BUCKET}/{KEY}")).unwrap();
    let error = client.read(&object, 0, 100).unwrap_err();
    assert_eq!(error.status(), Status::PermissionDenied, "{error}");
    let rejections = gcs.rejections();
    assert_eq!(rejections.len(), 1);
    assert_eq!(rejections[0].code, "SignatureDoesNotMatch");
    assert!(gcs.authenticated().is_empty());
}

#[test]
fn a_service_account_file_is_exchanged_once_at_its_token_endpoint() {
    let gcs = mock();
    let fakes = gcs.start_auth_fakes();
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "sa.json",
        &fakes.add_service_account("reader@karu-test.iam.gserviceaccount.com"),
    );
    let client = builder(&gcs, &[("GCE_METADATA_HOST", &dead_host())])
        .set("gcs.credentials_file", file)
        .build()
        .unwrap();
    assert_eq!(
        read_twice(&gcs, &client),
        ["service-account:reader@karu-test.iam.gserviceaccount.com"]
    );
    let calls = fakes.calls();
    assert_eq!((calls.service_account, calls.refused), (1, 0));
    assert_eq!(client.credential_stats().lookups, 1);
}

#[test]
fn an_authorized_user_from_google_application_credentials() {
    let gcs = mock();
    let fakes = gcs.start_auth_fakes();
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "adc.json",
        &fakes.add_authorized_user("client-1.apps", "client-secret", "1//refresh"),
    );
    let env = [
        ("GOOGLE_APPLICATION_CREDENTIALS", file.as_str()),
        ("HOME", dir.path().to_str().unwrap()),
        ("GCE_METADATA_HOST", &dead_host()),
    ];
    let client = builder(&gcs, &env).build().unwrap();
    assert_eq!(read_twice(&gcs, &client), ["user:client-1.apps"]);
    assert_eq!(fakes.calls().authorized_user, 1);
}

#[test]
fn the_gcloud_well_known_file_then_the_metadata_server() {
    let gcs = mock();
    let fakes = gcs.start_auth_fakes();
    let home = tempfile::tempdir().unwrap();
    let metadata = fakes.metadata_host();
    let env = [
        ("HOME", home.path().to_str().unwrap()),
        ("GCE_METADATA_HOST", metadata.as_str()),
    ];
    // No file: the metadata server.
    let client = builder(&gcs, &env).build().unwrap();
    assert_eq!(read_twice(&gcs, &client), ["metadata:default"]);
    assert_eq!(fakes.calls().metadata, 1);
    // The gcloud file comes first.
    let gcs = mock();
    let fakes = gcs.start_auth_fakes();
    write(
        home.path(),
        ".config/gcloud/application_default_credentials.json",
        &fakes.add_authorized_user("gcloud-user", "s", "1//r"),
    );
    let env = [
        ("HOME", home.path().to_str().unwrap()),
        ("GCE_METADATA_HOST", metadata.as_str()),
    ];
    let client = builder(&gcs, &env).build().unwrap();
    assert_eq!(read_twice(&gcs, &client), ["user:gcloud-user"]);
    assert_eq!(fakes.calls().metadata, 0);
    // CLOUDSDK_CONFIG names gcloud's directory.
    let gcs = mock();
    let fakes = gcs.start_auth_fakes();
    let config = tempfile::tempdir().unwrap();
    write(
        config.path(),
        "application_default_credentials.json",
        &fakes.add_authorized_user("sdk-config-user", "s", "1//r"),
    );
    let env = [
        ("HOME", home.path().to_str().unwrap()),
        ("CLOUDSDK_CONFIG", config.path().to_str().unwrap()),
        ("GCE_METADATA_HOST", metadata.as_str()),
    ];
    let client = builder(&gcs, &env).build().unwrap();
    assert_eq!(read_twice(&gcs, &client), ["user:sdk-config-user"]);
}

#[test]
fn a_static_token_and_hmac_keys_come_before_application_default_credentials() {
    let gcs = mock();
    let fakes = gcs.start_auth_fakes();
    gcs.add_token("ya29.static", "user:static");
    gcs.add_hmac_key("GOOG1ID", "secret");
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "sa.json",
        &fakes.add_service_account("sa@p.iam"),
    );
    let metadata = fakes.metadata_host();
    let env = [
        ("GOOGLE_APPLICATION_CREDENTIALS", file.as_str()),
        ("GCE_METADATA_HOST", metadata.as_str()),
    ];
    let hmac = builder(&gcs, &env)
        .set("gcs.hmac_access_id", "GOOG1ID")
        .set("gcs.hmac_secret", "secret");
    assert_eq!(
        read_twice(&gcs, &hmac.clone().build().unwrap()),
        ["hmac:GOOG1ID"]
    );
    let gcs2 = mock();
    gcs2.add_token("ya29.static", "user:static");
    let token = builder(&gcs2, &env)
        .set("gcs.hmac_access_id", "GOOG1ID")
        .set("gcs.hmac_secret", "secret")
        .set("gcs.token", "ya29.static");
    assert_eq!(read_twice(&gcs2, &token.build().unwrap()), ["user:static"]);
    let calls = fakes.calls();
    assert_eq!(
        (calls.service_account, calls.authorized_user, calls.metadata),
        (0, 0, 0)
    );
}

#[test]
fn an_expired_token_is_refreshed_once_after_a_401() {
    let gcs = mock();
    let fakes = gcs.start_auth_fakes();
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "sa.json",
        &fakes.add_service_account("sa@p.iam"),
    );
    let client = builder(&gcs, &[("GCE_METADATA_HOST", &dead_host())])
        .set("gcs.credentials_file", file)
        .build()
        .unwrap();
    let object = client.locate(&format!("gs://{BUCKET}/{KEY}")).unwrap();
    assert_eq!(client.read(&object, 0, 10).unwrap(), pattern(0, 10));
    gcs.revoke_token("ya29.karu-fake-1");
    assert_eq!(client.read(&object, 10, 10).unwrap(), pattern(10, 10));
    assert_eq!(gcs.expired_token_answers(), 1);
    assert_eq!(fakes.calls().service_account, 2);
    let log = gcs.server().requests();
    let tokens: Vec<_> = log.iter().map(|r| r.header("authorization")).collect();
    assert_eq!(
        tokens,
        [
            Some("Bearer ya29.karu-fake-1"),
            Some("Bearer ya29.karu-fake-1"),
            Some("Bearer ya29.karu-fake-2")
        ]
    );
    assert_eq!(
        log.iter().map(|r| r.status).collect::<Vec<_>>(),
        [206, 401, 206]
    );
}

#[test]
fn the_emulator_host_is_read_unauthenticated_unless_a_credential_is_configured() {
    let gcs = mock();
    gcs.set_public(BUCKET, true);
    gcs.add_token("ya29.static", "user:static");
    let host = gcs.endpoint().trim_start_matches("http://").to_string();
    let env = [
        ("STORAGE_EMULATOR_HOST", host.as_str()),
        ("GCE_METADATA_HOST", &dead_host()),
    ];
    let anonymous = Client::builder()
        .user_config_file(None)
        .project_config_file(None)
        .environment(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    assert_eq!(
        read_twice_at(&gcs, &anonymous.clone().build().unwrap(), media_path),
        ["anonymous"]
    );
    // As Google's clients read from an emulator: the JSON API's media downloads.
    let requests = gcs.server().requests();
    assert!(!requests.is_empty());
    for r in &requests {
        assert_eq!(r.path, media_path(BUCKET, KEY), "{r}");
        assert_eq!(r.query.as_deref(), Some("alt=media"), "{r}");
        assert!(r.header("authorization").is_none(), "{r}");
    }
    let gcs2 = mock();
    gcs2.add_token("ya29.static", "user:static");
    let host = gcs2.endpoint().trim_start_matches("http://").to_string();
    let env = [("STORAGE_EMULATOR_HOST", host.as_str())];
    let with_token = Client::builder()
        .user_config_file(None)
        .project_config_file(None)
        .environment(env.iter().map(|(k, v)| (k.to_string(), v.to_string())))
        .set("gcs.token", "ya29.static");
    assert_eq!(
        read_twice_at(&gcs2, &with_token.build().unwrap(), media_path),
        ["user:static"]
    );
}

#[test]
fn requester_pays_buckets_bill_the_user_project() {
    let gcs = mock();
    gcs.set_requester_pays(BUCKET, true);
    gcs.add_token("t", "user:t");
    let client = builder(&gcs, &[]).set("gcs.token", "t").build().unwrap();
    let object = client.locate(&format!("gs://{BUCKET}/{KEY}")).unwrap();
    let error = client.read(&object, 0, 10).unwrap_err();
    assert_eq!(error.status(), Status::Http, "{error}");
    assert_eq!(gcs.rejections()[0].code, "UserProjectMissing");
    let client = builder(&gcs, &[])
        .set("gcs.token", "t")
        .set("gcs.user_project", "payer-project")
        .build()
        .unwrap();
    assert_eq!(client.read(&object, 0, 10).unwrap(), pattern(0, 10));
    let billed: Vec<_> = gcs
        .authenticated()
        .into_iter()
        .map(|a| a.user_project)
        .collect();
    assert_eq!(billed, [Some("payer-project".to_string())]);
}

fn gzip_mock() -> (GcsMock, Vec<u8>, bytes::Bytes) {
    let gcs = GcsMock::start();
    gcs.add_token("t", "user:t");
    let identity: Vec<u8> = (0..200_000u32).flat_map(|i| i.to_le_bytes()).collect();
    let stored = gcs.insert_gzip(BUCKET, "table.csv.gz", &identity);
    (gcs, identity, stored)
}

#[test]
fn a_gzip_stored_object_is_read_as_stored_bytes() {
    for (api, path_of) in APIS {
        let (gcs, identity, stored) = gzip_mock();
        assert_ne!(&stored[..], &identity[..]);
        let client = builder(&gcs, &[])
            .set("gcs.token", "t")
            .set("gcs.api", api)
            .build()
            .unwrap();
        let object = client
            .locate(&format!("gs://{BUCKET}/table.csv.gz"))
            .unwrap();
        let info = client.stat(&object).unwrap();
        assert_eq!(info.size, Some(stored.len() as u64));
        assert_eq!(client.read(&object, 0, 10).unwrap(), &stored[..10]);
        let mid = stored.len() as u64 / 2;
        assert_eq!(
            client.read(&object, mid, 1000).unwrap(),
            &stored[mid as usize..mid as usize + 1000]
        );
        let log = gcs.server().requests();
        for r in &log {
            assert_eq!(r.path, path_of(BUCKET, "table.csv.gz"), "{api}: {r}");
            assert_eq!(r.header("accept-encoding"), Some("gzip"), "{api}: {r}");
        }
        assert_eq!(log.last().unwrap().byte_range, Some((mid, mid + 999)));
        assert_eq!(gcs.decompressed_answers(), 0);
    }
}

#[test]
fn decompressed_answers_are_refused_never_delivered() {
    for (api, path_of) in APIS {
        for fault in [Decompression::Announced, Decompression::Silent] {
            let (gcs, _, _) = gzip_mock();
            gcs.set_decompression(Some(fault));
            let client = builder(&gcs, &[])
                .set("gcs.token", "t")
                .set("gcs.api", api)
                .build()
                .unwrap();
            let object = client
                .locate(&format!("gs://{BUCKET}/table.csv.gz"))
                .unwrap();
            let error = client.read(&object, 100, 10).unwrap_err();
            assert_eq!(error.status(), Status::Protocol, "{api} {fault:?}: {error}");
            assert_eq!(gcs.decompressed_answers(), 1, "{api} {fault:?}: retried");
            let requests = gcs.server().requests();
            assert_eq!(requests.len(), 1);
            assert_eq!(requests[0].path, path_of(BUCKET, "table.csv.gz"));
        }
    }
}

#[test]
fn if_match_sends_the_etag_stat_returned() {
    for (api, path_of) in APIS {
        let gcs = mock();
        gcs.add_token("t", "user:t");
        let client = builder(&gcs, &[])
            .set("gcs.token", "t")
            .set("gcs.api", api)
            .build()
            .unwrap();
        let object = client.locate(&format!("gs://{BUCKET}/{KEY}")).unwrap();
        let etag = client.stat(&object).unwrap().etag.unwrap();
        let read = |etag: &str| {
            client
                .submit([Read::new(&object, 5, 10).if_match(etag)])
                .wait()
                .pop()
                .unwrap()
        };
        let done = read(&etag);
        assert!(done.is_ok(), "{api}: {:?}", done.status());
        let last = gcs.server().requests().pop().unwrap();
        assert_eq!(last.header("if-match"), Some(etag.as_str()), "{api}");
        assert_eq!(last.path, path_of(BUCKET, KEY), "{api}");
        gcs.set_etag(BUCKET, KEY, Some("\"another-version\""));
        assert_eq!(read(&etag).status(), Status::PreconditionFailed, "{api}");
        assert_eq!(gcs.server().requests().last().unwrap().status, 412, "{api}");
    }
}

#[test]
fn hmac_keys_with_the_json_api_fail_each_read_before_any_request() {
    let gcs = mock();
    gcs.add_hmac_key("GOOG1EXAMPLE", "hmac-secret");
    let host = gcs.endpoint().trim_start_matches("http://").to_string();
    let client = Client::builder()
        .user_config_file(None)
        .project_config_file(None)
        .environment([("STORAGE_EMULATOR_HOST", host)])
        .set("gcs.hmac_access_id", "GOOG1EXAMPLE")
        .set("gcs.hmac_secret", "hmac-secret")
        .build()
        .unwrap();
    let object = client.locate(&format!("gs://{BUCKET}/{KEY}")).unwrap();
    let error = client.read(&object, 0, 10).unwrap_err();
    assert_eq!(error.status(), Status::InvalidArgument, "{error}");
    assert!(gcs.server().requests().is_empty());
    // With the XML API chosen, the same keys sign the reads.
    let client = Client::builder()
        .user_config_file(None)
        .project_config_file(None)
        .environment([("STORAGE_EMULATOR_HOST", gcs.endpoint())])
        .set("gcs.hmac_access_id", "GOOG1EXAMPLE")
        .set("gcs.hmac_secret", "hmac-secret")
        .set("gcs.api", "xml")
        .build()
        .unwrap();
    assert_eq!(read_twice(&gcs, &client), ["hmac:GOOG1EXAMPLE"]);
}

#[test]
fn pasted_urls_read_the_same_object() {
    let gcs = mock();
    gcs.add_token("t", "user:t");
    let client = builder(&gcs, &[]).set("gcs.token", "t").build().unwrap();
    for address in [
        "gs://bkt/dir/a b+c%d/ü//x.bin",
        "https://storage.googleapis.com/bkt/dir/a%20b%2Bc%25d/%C3%BC//x.bin",
        "https://storage.cloud.google.com/bkt/dir/a%20b%2Bc%25d/%C3%BC//x.bin",
        "https://bkt.storage.googleapis.com/dir/a%20b%2Bc%25d/%C3%BC//x.bin",
    ] {
        let object = client.locate(address).unwrap();
        assert_eq!(object.canonical().as_str(), "gs://bkt/dir/a b+c%d/ü//x.bin");
        assert_eq!(client.read(&object, 7, 3).unwrap(), pattern(7, 3));
    }
    let paths: Vec<_> = gcs
        .server()
        .requests()
        .into_iter()
        .map(|r| r.path)
        .collect();
    assert!(
        paths.iter().all(|p| *p == object_path(BUCKET, KEY)),
        "{paths:?}"
    );
}

#[test]
fn anonymous_access_reads_public_buckets_without_authorization() {
    let gcs = mock();
    gcs.set_public(BUCKET, true);
    let client = builder(&gcs, &[("GOOGLE_OAUTH_ACCESS_TOKEN", "ya29.unused")])
        .set("gcs.anonymous", true)
        .build()
        .unwrap();
    assert_eq!(read_twice(&gcs, &client), ["anonymous"]);
    assert!(
        gcs.server()
            .requests()
            .iter()
            .all(|r| r.header("authorization").is_none())
    );
    assert_eq!(client.credential_stats().lookups, 0);
    // A private bucket refuses them.
    gcs.set_public(BUCKET, false);
    let object = client.locate(&format!("gs://{BUCKET}/{KEY}")).unwrap();
    let error = client.read(&object, 0, 10).unwrap_err();
    assert_eq!(error.status(), Status::PermissionDenied, "{error}");
}

#[test]
fn an_application_callback_supplies_tokens_and_hmac_keys_for_the_gcp_family() {
    use karu::CallbackCredential;
    let gcs = mock();
    gcs.insert_virtual("other", KEY, SIZE);
    gcs.add_token("ya29.from-vault", "user:vault");
    gcs.add_hmac_key("GOOG1VAULT", "vault-secret");
    let callback = |path: &karu::CanonicalPath| {
        let credential = if path.as_str().starts_with("gs://bkt/") {
            karu_provider_gcs::credential("ya29.from-vault", None)
        } else {
            karu_provider_gcs::hmac_credential("GOOG1VAULT", "vault-secret")
        };
        Ok(CallbackCredential::once(credential))
    };
    let client = builder(&gcs, &[])
        .credential_callback(karu_provider_gcs::FAMILY, callback)
        .build()
        .unwrap();
    for bucket in [BUCKET, "other"] {
        let object = client.locate(&format!("gs://{bucket}/{KEY}")).unwrap();
        assert_eq!(client.read(&object, 3, 7).unwrap(), pattern(3, 7));
    }
    let identities: Vec<_> = gcs
        .authenticated()
        .into_iter()
        .map(|a| a.identity)
        .collect();
    assert_eq!(identities, ["user:vault", "hmac:GOOG1VAULT"]);
}

#[test]
fn a_token_s_lifetime_goes_into_the_credential_cache() {
    // Tokens that expire as they are issued are looked up again for every read; tokens that
    // live an hour are looked up once (the service-account test above).
    let gcs = mock();
    let fakes = gcs.start_auth_fakes();
    fakes.set_expires_in(0);
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "sa.json",
        &fakes.add_service_account("sa@p.iam"),
    );
    let client = builder(&gcs, &[("GCE_METADATA_HOST", &dead_host())])
        .set("gcs.credentials_file", file)
        .build()
        .unwrap();
    let object = client.locate(&format!("gs://{BUCKET}/{KEY}")).unwrap();
    for i in 0..3 {
        assert_eq!(
            client.read(&object, i * 10, 10).unwrap(),
            pattern(i * 10, 10)
        );
    }
    assert_eq!(fakes.calls().service_account, 3);
    let tokens: Vec<_> = gcs
        .server()
        .requests()
        .iter()
        .map(|r| r.header("authorization").unwrap_or("").to_string())
        .collect();
    assert_eq!(
        tokens,
        [
            "Bearer ya29.karu-fake-1",
            "Bearer ya29.karu-fake-2",
            "Bearer ya29.karu-fake-3"
        ]
    );
}

/// The token requests (to the metadata server or the token endpoint) in the fakes' log, and
/// the status each was answered with.
fn token_statuses(fakes: &karu_testkit::gcs::GcsAuthFakes) -> Vec<u16> {
    fakes
        .server()
        .requests()
        .iter()
        .filter(|r| r.path.ends_with("/token"))
        .map(|r| r.status)
        .collect()
}

/// A client of the metadata server's token, with short waits between attempts.
fn metadata_client(gcs: &GcsMock, fakes: &karu_testkit::gcs::GcsAuthFakes) -> ClientBuilder {
    let home = std::env::temp_dir().join("karu-no-such-home");
    builder(
        gcs,
        &[
            ("HOME", home.to_str().unwrap()),
            ("GCE_METADATA_HOST", &fakes.metadata_host()),
        ],
    )
    .set("retry.initial_backoff", "10ms")
    .set("retry.max_backoff", "50ms")
}

#[test]
fn a_token_exchange_that_meets_a_429_a_5xx_or_a_reset_is_tried_again() {
    use karu_testkit::{Fault, FaultRule};
    let status = |code| Fault::Status {
        code,
        retry_after: None,
    };
    // The fault, how many times, the statuses of the token requests, and how many of them
    // the metadata server answered (a status fault answers in its place).
    for (fault, times, answered, tokens) in [
        (status(429), 1, vec![429, 200], 1),
        (status(503), 2, vec![503, 503, 200], 1),
        (status(500), 1, vec![500, 200], 1),
        // Headers, then the connection reset before the body: no token to read (the log
        // shows the status the server began to send).
        (Fault::ResetAfter(0), 1, vec![200, 200], 2),
    ] {
        let gcs = mock();
        let fakes = gcs.start_auth_fakes();
        fakes
            .server()
            .add_fault(FaultRule::new(fault.clone()).times(times));
        let client = metadata_client(&gcs, &fakes).build().unwrap();
        // Four reads wait for the one lookup: each of them gets its bytes.
        let objects: Vec<_> = (0..4)
            .map(|i| {
                let key = format!("o{i}.bin");
                gcs.insert_virtual(BUCKET, &key, SIZE);
                client.locate(&format!("gs://{BUCKET}/{key}")).unwrap()
            })
            .collect();
        let batch = client.submit(objects.iter().map(|o| Read::new(o, 100, 50)));
        for c in karu_testkit::reads::drain(&batch) {
            assert_eq!(c.status(), Status::Ok, "{fault:?}: {c:?}");
            assert_eq!(c.bytes(), pattern(100, 50), "{fault:?}");
        }
        assert_eq!(token_statuses(&fakes), answered, "{fault:?}");
        assert_eq!(fakes.calls().metadata, tokens, "{fault:?}");
        let stats = client.credential_stats();
        assert_eq!(
            (stats.lookups, stats.failures),
            (1, 0),
            "{fault:?}: {stats:?}"
        );
        assert!(
            gcs.authenticated()
                .iter()
                .all(|a| a.identity == "metadata:default"),
            "{fault:?}"
        );
    }
}

#[test]
fn a_service_account_exchange_answered_503_is_tried_again() {
    use karu_testkit::{Fault, FaultRule};
    let gcs = mock();
    let fakes = gcs.start_auth_fakes();
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "sa.json",
        &fakes.add_service_account("sa@p.iam"),
    );
    fakes.server().add_fault(
        FaultRule::new(Fault::Status {
            code: 503,
            retry_after: Some("0".into()),
        })
        .method("POST")
        .times(1),
    );
    let client = builder(&gcs, &[("GCE_METADATA_HOST", &dead_host())])
        .set("gcs.credentials_file", file)
        .set("retry.initial_backoff", "10ms")
        .build()
        .unwrap();
    assert_eq!(read_twice(&gcs, &client), ["service-account:sa@p.iam"]);
    assert_eq!(token_statuses(&fakes), [503, 200]);
    assert_eq!(fakes.calls().service_account, 1);
}

#[test]
fn a_refused_token_exchange_is_not_tried_again_and_a_failing_one_only_as_often_as_the_policy_allows()
 {
    use karu_testkit::{Fault, FaultRule};
    let status = |code| Fault::Status {
        code,
        retry_after: None,
    };
    // A refusal (403) is not retried; an endpoint that keeps answering 503 is asked
    // `retry.attempts` times. Either way the read fails with Credentials, naming the answer.
    for (fault, attempts, answered) in [
        (status(403), 8, vec![403]),
        (status(503), 3, vec![503, 503, 503]),
    ] {
        let gcs = mock();
        let fakes = gcs.start_auth_fakes();
        fakes.server().add_fault(FaultRule::new(fault.clone()));
        let client = metadata_client(&gcs, &fakes)
            .set("retry.attempts", attempts)
            .build()
            .unwrap();
        let object = client.locate(&format!("gs://{BUCKET}/{KEY}")).unwrap();
        let error = client.read(&object, 0, 10).unwrap_err();
        assert_eq!(error.status(), Status::Credentials, "{fault:?}: {error}");
        assert!(
            error.message().contains(&answered[0].to_string()),
            "{fault:?}: {error}"
        );
        assert_eq!(token_statuses(&fakes), answered, "{fault:?}");
        assert!(
            gcs.server().requests().is_empty(),
            "nothing reached storage"
        );
    }
}

#[test]
fn a_token_exchange_is_tried_again_only_within_the_reads_deadline() {
    use karu_testkit::{Fault, FaultRule};
    // An endpoint that keeps answering 503, a budget of 1,000 attempts and a read's deadline
    // of one second: the waits (at least 25 ms each) leave room for at most 40 exchanges, and
    // the read fails with what the endpoint answered (or at its deadline), not after 1,000.
    let gcs = mock();
    let fakes = gcs.start_auth_fakes();
    fakes.server().add_fault(FaultRule::new(Fault::Status {
        code: 503,
        retry_after: None,
    }));
    let client = metadata_client(&gcs, &fakes)
        .set("retry.attempts", 1000)
        .set("retry.initial_backoff", "50ms")
        .set("retry.deadline", "1s")
        .build()
        .unwrap();
    let object = client.locate(&format!("gs://{BUCKET}/{KEY}")).unwrap();
    let error = client.read(&object, 0, 10).unwrap_err();
    assert!(
        matches!(error.status(), Status::Credentials | Status::TimedOut),
        "{error}"
    );
    let answered = token_statuses(&fakes);
    assert!((2..=40).contains(&answered.len()), "{answered:?}");
    assert!(answered.iter().all(|&s| s == 503), "{answered:?}");
}
