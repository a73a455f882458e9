//! `-v` and `-vv` show each request (method, URL, range, status, attempt, time) on stderr, as
//! `curl -v` does, and no secret: signed S3 reads (a key pair and a session token), GCS reads
//! with a bearer token, Azure reads with a Shared Key and with a SAS, and Hugging Face reads of
//! a private repository (a token, then a signed CDN location) are read at `-vv` against the
//! testkit's mocks, and the whole of stderr is searched for every secret.

mod support;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use karu_testkit::hf::{HfMock, RepoAccess};
use karu_testkit::{AzureMock, GcsMock, MockCredentials, MockServer, S3Mock};
use support::{isolate, run};

/// `karu ARGS` isolated in `home`, with `env` added.
fn karu_env(home: &Path, env: &[(&str, &str)], args: &[&str]) -> support::Run {
    let mut command = Command::new(env!("CARGO_BIN_EXE_karu"));
    isolate(&mut command, home)
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .envs(env.iter().copied())
        .args(args);
    run(&mut command)
}

/// What every `-v` log of a successful read shows: the request and its answer.
#[track_caller]
fn assert_shows_the_exchange(log: &str, url_start: &str, range: &str) {
    for needed in [
        "karu::http",
        "request",
        "method=\"GET\"",
        &format!("url={url_start}"),
        &format!("range=\"{range}\""),
        "response status=206",
        "attempt=1",
        "attempt ended",
        "outcome=ok",
        "ms=",
    ] {
        assert!(log.contains(needed), "no {needed:?} in:\n{log}");
    }
}

/// None of `secrets`, nor anything that looks like a signature or a credential header,
/// appears in `log`.
#[track_caller]
fn assert_free_of(log: &str, secrets: &[&str]) {
    let marks = [
        "AWS4-HMAC-SHA256",
        "Signature=",
        "X-Amz-Signature",
        "X-Amz-Credential",
        "X-Amz-Security-Token",
        "SharedKey",
        "Bearer",
        "sig=",
        "authorization:",
    ];
    for secret in secrets.iter().chain(&marks) {
        assert!(
            !log.to_ascii_lowercase()
                .contains(&secret.to_ascii_lowercase()),
            "{secret:?} in:\n{log}"
        );
    }
}

#[test]
fn one_v_shows_each_request_of_a_plain_read_and_nothing_else() {
    let server = MockServer::start();
    server.insert_virtual("/obj.bin", 1000);
    let home = tempfile::tempdir().unwrap();
    let url = server.url("/obj.bin?token=SECRET-QUERY");
    let out = karu_env(home.path(), &[], &["-v", "read", &url, "10:20"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.stdout, karu_testkit::pattern(10, 20));
    assert_shows_the_exchange(&out.stderr, &server.base_url(), "bytes=10-29");
    assert!(out.stderr.contains("/obj.bin?<redacted>"), "{}", out.stderr);
    assert_free_of(&out.stderr, &["SECRET-QUERY"]);
    // Without -v, nothing; KARU_LOG takes a filter instead.
    let out = karu_env(home.path(), &[], &["read", &url, "10:20"]);
    assert_eq!((out.code, out.stderr.as_str()), (0, ""));
    let out = karu_env(
        home.path(),
        &[("KARU_LOG", "karu::http=debug")],
        &["read", &url, "10:20"],
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert_shows_the_exchange(&out.stderr, &server.base_url(), "bytes=10-29");
    let out = karu_env(
        home.path(),
        &[("RUST_LOG", "karu::http=debug")],
        &["read", &url, "10:20"],
    );
    assert_shows_the_exchange(&out.stderr, &server.base_url(), "bytes=10-29");
    let out = karu_env(
        home.path(),
        &[("KARU_LOG", "karu[=bad")],
        &["read", &url, "10:20"],
    );
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stderr.contains("KARU_LOG"), "{out:?}");
}

#[test]
fn signed_s3_reads_show_their_requests_and_no_secret() {
    let s3 = S3Mock::start();
    s3.insert_virtual("bkt", "dir/obj.bin", 4096);
    let creds = MockCredentials::new("AKIAVERBOSETEST00001", "s3-secret-key-VERBOSE")
        .with_session_token("s3-session-token-VERBOSE");
    s3.add_credentials(creds.clone());
    let home = tempfile::tempdir().unwrap();
    let endpoint = s3.endpoint();
    let region = s3.region();
    let out = karu_env(
        home.path(),
        &[
            ("AWS_ACCESS_KEY_ID", &creds.access_key_id),
            ("AWS_SECRET_ACCESS_KEY", &creds.secret_access_key),
            ("AWS_SESSION_TOKEN", creds.session_token.as_deref().unwrap()),
            ("AWS_REGION", &region),
            ("AWS_ENDPOINT_URL", &endpoint),
        ],
        &["-vv", "read", "s3://bkt/dir/obj.bin", "100:50"],
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.stdout, karu_testkit::pattern(100, 50));
    assert_shows_the_exchange(&out.stderr, &endpoint, "bytes=100-149");
    assert!(
        out.stderr.contains("s3://bkt/dir/obj.bin"),
        "the object: {}",
        out.stderr
    );
    assert_free_of(
        &out.stderr,
        &["s3-secret-key-VERBOSE", "s3-session-token-VERBOSE"],
    );
    assert!(
        s3.server().requests().iter().all(|r| r.status == 206),
        "every request was signed and accepted"
    );
}

#[test]
fn gcs_reads_with_a_token_show_their_requests_and_no_secret() {
    let gcs = GcsMock::start();
    gcs.insert_virtual("bkt", "obj.bin", 4096);
    gcs.add_token("ya29.gcs-token-VERBOSE", "user:verbose");
    let home = tempfile::tempdir().unwrap();
    let endpoint = gcs.endpoint();
    let out = karu_env(
        home.path(),
        &[("GOOGLE_OAUTH_ACCESS_TOKEN", "ya29.gcs-token-VERBOSE")],
        &[
            "-vv",
            "--set",
            &format!("gcs.endpoint={endpoint}"),
            "--set",
            "gcs.discovery=false",
            "read",
            "gs://bkt/obj.bin",
            "0:100",
        ],
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.stdout, karu_testkit::pattern(0, 100));
    assert_shows_the_exchange(&out.stderr, &endpoint, "bytes=0-99");
    assert_free_of(&out.stderr, &["gcs-token-VERBOSE"]);
    assert_eq!(gcs.rejections(), vec![]);
}

#[test]
fn azure_reads_with_a_shared_key_or_a_sas_show_their_requests_and_no_secret() {
    let azure = AzureMock::start();
    azure.insert_virtual("data", "obj.bin", 4096);
    let home = tempfile::tempdir().unwrap();
    let endpoint = azure.endpoint();
    let key = azure.account_key();
    let account = azure.account().to_owned();
    let out = karu_env(
        home.path(),
        &[
            ("AZURE_STORAGE_ACCOUNT_KEY", &key),
            ("AZURE_STORAGE_ACCOUNT_NAME", &account),
        ],
        &[
            "-vv",
            "--set",
            &format!("azure.endpoint={endpoint}"),
            "read",
            "az://data/obj.bin",
            "0:100",
        ],
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.stdout, karu_testkit::pattern(0, 100));
    assert_shows_the_exchange(&out.stderr, &endpoint, "bytes=0-99");
    assert_free_of(&out.stderr, &[&key]);

    let sas = azure.sas_token("data", Duration::from_secs(3600));
    let out = karu_env(
        home.path(),
        &[
            ("AZURE_STORAGE_SAS_TOKEN", &sas),
            ("AZURE_STORAGE_ACCOUNT_NAME", &account),
        ],
        &[
            "-vv",
            "--set",
            &format!("azure.endpoint={endpoint}"),
            "read",
            "az://data/obj.bin",
            "100:100",
        ],
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert_shows_the_exchange(&out.stderr, &endpoint, "bytes=100-199");
    assert!(out.stderr.contains("?<redacted>"), "{}", out.stderr);
    let signature = sas
        .split('&')
        .find_map(|kv| kv.strip_prefix("sig="))
        .expect("a SAS has a signature");
    assert_free_of(&out.stderr, &[&sas, signature, &key]);
}

#[test]
fn hugging_face_reads_of_a_private_repository_show_their_requests_and_no_secret() {
    let hf = HfMock::start();
    hf.add_token("hf_token_VERBOSE");
    hf.create_repo(
        "org/private",
        RepoAccess::Private(vec!["hf_token_VERBOSE".into()]),
    );
    hf.insert_virtual("org/private", "main", "weights.bin", 4096);
    let home = tempfile::tempdir().unwrap();
    let endpoint = hf.endpoint();
    let out = karu_env(
        home.path(),
        &[("HF_TOKEN", "hf_token_VERBOSE"), ("HF_ENDPOINT", &endpoint)],
        &["-vv", "read", "hf://org/private/weights.bin", "0:64"],
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.stdout, karu_testkit::pattern(0, 64));
    // The Hub's redirect, then the CDN's bytes at a signed location.
    assert!(
        out.stderr.contains(&format!("url={endpoint}")),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("response status=302"), "{}", out.stderr);
    assert_shows_the_exchange(&out.stderr, &hf.cdn().base_url(), "bytes=0-63");
    assert!(out.stderr.contains("?<redacted>"), "{}", out.stderr);
    assert_free_of(&out.stderr, &["hf_token_VERBOSE"]);
    assert_eq!(hf.authorization_leaks(), 0);
}
