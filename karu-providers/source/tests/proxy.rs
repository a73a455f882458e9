//! The Source Cooperative provider against the testkit's data-proxy mock: the conformance
//! suite (signed), anonymous public reads, Source's own profile with a `credential_process`,
//! the callback, and a credential scope apart from S3's.

use karu::{CallbackCredential, CanonicalPath, Client, ClientBuilder, Status};
use karu_testkit::aws::write_credential_process;
use karu_testkit::conformance::{self, Options, SourceMockTarget};
use karu_testkit::pattern;
use karu_testkit::source::SourceMock;

const ADDRESS: &str = "source://acct/product/dir/file.bin";

fn isolated(source: &SourceMock, env: &[(&str, String)]) -> ClientBuilder {
    Client::builder()
        .user_config_file(None)
        .project_config_file(None)
        .environment(env.iter().map(|(k, v)| (k.to_string(), v.clone())))
        .set("source.endpoint", source.endpoint())
}

/// A mock with one 1000-byte file in a private (`public = false`) or public account.
fn mock(public: bool) -> SourceMock {
    let source = SourceMock::start();
    source.set_public("acct", public);
    source.insert("acct", "product", "dir/file.bin", pattern(0, 1000));
    source
}

#[test]
fn the_source_provider_conforms_on_the_data_proxy_mock() {
    let target = SourceMockTarget::start();
    let report = conformance::run(&target, &Options::default().seeds_from_env());
    println!("{report}");
    report.assert_passed();
    assert!(target.mock_source().s3().signature_failures().is_empty());
}

#[test]
fn public_data_is_read_anonymously_and_private_data_is_denied() {
    let source = mock(true);
    let client = isolated(&source, &[]).build().unwrap();
    for address in [
        ADDRESS,
        "https://data.source.coop/acct/product/dir/file.bin",
    ] {
        let object = client.locate(address).unwrap();
        assert_eq!(object.canonical().as_str(), ADDRESS);
        assert_eq!(client.read(&object, 10, 20).unwrap(), pattern(10, 20));
    }
    let log = source.server().take_requests();
    assert_eq!(log.len(), 2);
    assert!(log.iter().all(|r| r.header("authorization").is_none()));
    assert!(log.iter().all(|r| r.path == "/acct/product/dir/file.bin"));

    let private = mock(false);
    let client = isolated(&private, &[]).build().unwrap();
    let object = client.locate(ADDRESS).unwrap();
    let error = client.read(&object, 0, 10).unwrap_err();
    assert_eq!(error.status(), Status::PermissionDenied, "{error}");
}

#[test]
fn a_source_profile_with_a_credential_process_signs_and_aws_credentials_are_never_used() {
    let source = mock(false);
    let dir = tempfile::tempdir().unwrap();
    let script = write_credential_process(dir.path(), &source.credentials(), None);
    let config = dir.path().join("aws-config");
    std::fs::write(
        &config,
        format!(
            "[profile source-coop]\ncredential_process = {}\n",
            script.display()
        ),
    )
    .unwrap();
    // The AWS environment holds keys the proxy does not know: they must not be used.
    let env = [
        ("HOME", dir.path().to_str().unwrap().to_string()),
        ("AWS_CONFIG_FILE", config.to_str().unwrap().to_string()),
        ("AWS_ACCESS_KEY_ID", "AKIAWRONGWRONGWRONG".to_string()),
        ("AWS_SECRET_ACCESS_KEY", "wrong".to_string()),
    ];
    let client = isolated(&source, &env)
        .set("source.profile", "source-coop")
        .build()
        .unwrap();
    let object = client.locate(ADDRESS).unwrap();
    assert_eq!(client.read(&object, 0, 100).unwrap(), pattern(0, 100));
    let log = source.server().take_requests();
    let key = source.credentials().access_key_id;
    assert_eq!(log.len(), 1);
    assert!(
        log[0]
            .header("authorization")
            .is_some_and(|a| a.starts_with("AWS4-HMAC-SHA256") && a.contains(&key)),
        "{log:?}"
    );
    assert!(source.s3().signature_failures().is_empty());

    // The same command named in the section instead of a profile.
    let client = isolated(&source, &env)
        .set("source.credential_process", script.to_str().unwrap())
        .build()
        .unwrap();
    let object = client.locate(ADDRESS).unwrap();
    assert_eq!(client.read(&object, 100, 100).unwrap(), pattern(100, 100));
    let log = source.server().take_requests();
    assert!(
        log[0]
            .header("authorization")
            .is_some_and(|a| a.contains(&key)),
        "{log:?}"
    );
    assert!(source.s3().signature_failures().is_empty());
}

#[test]
fn a_callback_signs_and_the_scope_is_apart_from_s3s() {
    let source = mock(false);
    let creds = source.credentials();
    let client = isolated(&source, &[])
        // S3 keys configured for S3 are not Source's.
        .set("s3.access_key_id", "AKIAS3ONLY")
        .set("s3.secret_access_key", "s3-secret")
        .credential_callback(karu_provider_source::FAMILY, move |_: &CanonicalPath| {
            Ok(CallbackCredential::once(karu_provider_source::credential(
                creds.access_key_id.clone(),
                creds.secret_access_key.clone(),
                None,
                None,
            )))
        })
        .build()
        .unwrap();
    let object = client.locate(ADDRESS).unwrap();
    assert_eq!(client.read(&object, 0, 10).unwrap(), pattern(0, 10));
    assert!(source.s3().signature_failures().is_empty());
    assert_eq!(client.credential_stats().callback_calls, 1);

    // Without a callback, the S3 keys do not make Source reads signed.
    let public = mock(true);
    let client = isolated(&public, &[])
        .set("s3.access_key_id", "AKIAS3ONLY")
        .set("s3.secret_access_key", "s3-secret")
        .build()
        .unwrap();
    let object = client.locate(ADDRESS).unwrap();
    client.read(&object, 0, 10).unwrap();
    assert!(
        public.server().take_requests()[0]
            .header("authorization")
            .is_none()
    );

    // An API key in the section signs too; a wrong one is refused by the proxy.
    let wrong = isolated(&source, &[])
        .set("source.access_key_id", "AKIDUNKNOWN")
        .set("source.secret_access_key", "nope")
        .build()
        .unwrap();
    let object = wrong.locate(ADDRESS).unwrap();
    let error = wrong.read(&object, 0, 10).unwrap_err();
    assert_eq!(error.status(), Status::PermissionDenied, "{error}");
}
