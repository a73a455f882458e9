//! Secrets never leave through diagnostics: every `tracing` event (TRACE level, every crate,
//! `log` records included) of signed reads, a retried 503, a wrong secret, a region correction,
//! an expired token and credential discovery is captured, and none holds a secret key, a
//! session token, a container token, a SigV4 `Authorization` value or a query string; nor do
//! the `Debug` forms of the client, its builder and the errors.
//!
//! The subscriber is process-global (Karu logs from its own threads), so this binary holds
//! only these tests; each checks the whole capture for its own secrets.

mod support;

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime};

use karu::Status;
use karu_testkit::reads::{assert_failed, assert_ok, read_one};
use karu_testkit::{Fault, FaultRule, MockCredentials, MockServer, S3Mock};
use support::{
    AwsEnv, BUCKET, accepted_fakes, assert_free_of, build, describe, discovering, explicit, locate,
    statuses, with_keys,
};

const MIB: u64 = 1 << 20;

/// Everything logged since the process started.
static CAPTURE: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();

#[derive(Debug)]
struct Sink(Arc<Mutex<Vec<u8>>>);

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Install the capturing subscriber (once) and return the capture.
fn capture() -> Arc<Mutex<Vec<u8>>> {
    Arc::clone(CAPTURE.get_or_init(|| {
        let buffer = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&buffer);
        tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_ansi(false)
            .with_thread_names(true)
            .with_writer(move || Sink(Arc::clone(&sink)))
            .try_init()
            .expect("the only global subscriber of this binary");
        buffer
    }))
}

fn captured(buffer: &Mutex<Vec<u8>>) -> String {
    String::from_utf8_lossy(&buffer.lock().unwrap()).into_owned()
}

/// What a SigV4 `Authorization` value or a presigned query looks like.
const SIGNING_MARKS: [(&str, &str); 5] = [
    ("authorization value", "AWS4-HMAC-SHA256 Credential="),
    ("signature", "Signature="),
    ("presigned signature", "X-Amz-Signature"),
    ("presigned credential", "X-Amz-Credential"),
    ("presigned token", "X-Amz-Security-Token"),
];

#[test]
fn signed_reads_retries_and_failures_log_no_secret() {
    let log = capture();
    let s3 = S3Mock::builder().wrong_region_status(301).start().unwrap();
    s3.insert_virtual(BUCKET, "a.bin", MIB);
    s3.insert_virtual("eu-bucket", "a.bin", MIB);
    s3.set_bucket_region("eu-bucket", "eu-west-1");
    let creds = MockCredentials::new(
        "ASIASECRETSTEST00001",
        "tracing/secret/key/never/logged/0000",
    )
    .with_session_token("tracing-session-token-never-logged");
    s3.add_credentials(creds.clone());
    let env = AwsEnv::new();

    // A 503, retried; then a region correction.
    s3.server().add_fault(
        FaultRule::new(Fault::Status {
            code: 503,
            retry_after: None,
        })
        .times(1),
    );
    let client = build(with_keys(&s3, &env, &creds));
    assert_ok(
        &read_one(&client, &locate(&client, BUCKET, "a.bin"), 0, 100),
        0,
        100,
    );
    assert_ok(
        &read_one(&client, &locate(&client, "eu-bucket", "a.bin"), 0, 100),
        0,
        100,
    );
    let requests = s3.server().take_requests();
    assert_eq!(
        statuses(&requests),
        [503, 206, 301, 206],
        "{}",
        describe(&requests)
    );

    // A wrong secret: S3 echoes the string to sign and the signature provided.
    let wrong = MockCredentials::new(
        creds.access_key_id.clone(),
        "wrong/secret/never/logged/000000",
    )
    .with_session_token("tracing-session-token-never-logged");
    let bad = build(with_keys(&s3, &env, &wrong));
    let c = read_one(&bad, &locate(&bad, BUCKET, "a.bin"), 0, 100);
    assert_failed(&c, Status::PermissionDenied);
    let requests = s3.server().requests();
    let auth = requests[0].header("authorization").unwrap().to_string();
    let signature = auth.rsplit("Signature=").next().unwrap().to_string();

    let text = captured(&log);
    // The capture holds what the signer and the engine logged on their own threads.
    for target in ["aws_sigv4::http_request::sign", "karu_engine::http::fetch"] {
        assert!(text.contains(target), "{target} is captured");
    }
    // A subscriber that wants spans gets each read's `fetch` span around the events of its
    // attempts (here each request's, under the `karu::http` target that `karu -v` shows).
    assert!(
        text.lines().any(|line| line.contains("fetch{object=")
            && line.contains("range=bytes=0-99")
            && line.contains("karu::http: request method=\"GET\"")),
        "the requests' events are captured inside their fetch span"
    );
    let secrets = [
        ("secret key", creds.secret_access_key.as_str()),
        ("wrong secret key", wrong.secret_access_key.as_str()),
        ("session token", "tracing-session-token-never-logged"),
        ("signature", signature.as_str()),
        ("authorization header", auth.as_str()),
    ];
    assert_free_of("the trace", &text, &secrets);
    assert_free_of("the trace", &text, &SIGNING_MARKS);
    for what in [
        format!("{client:?}"),
        format!("{bad:?}"),
        format!("{:?}", with_keys(&s3, &env, &creds)),
        format!("{c:?}"),
        format!("{:?}", c.error().unwrap()),
        c.error().unwrap().to_string(),
    ] {
        assert_free_of("a Debug form", &what, &secrets);
        assert_free_of("a Debug form", &what, &SIGNING_MARKS);
    }
}

#[test]
fn discovery_and_an_expired_token_log_no_secret() {
    let log = capture();
    let s3 = S3Mock::start();
    s3.insert_virtual(BUCKET, "a.bin", MIB);
    let (fakes, first) = accepted_fakes(&s3);
    let env = AwsEnv::new().container(&fakes, &fakes.container_token());
    let client = build(discovering(&s3, &env));
    let object = locate(&client, BUCKET, "a.bin");
    assert_ok(&read_one(&client, &object, 0, 10), 0, 10);
    s3.revoke_credentials(&first.access_key_id);
    let second = MockCredentials::new("ASIASECRETSRENEWED01", "renewed/secret/never/logged/00000")
        .with_session_token("renewed-session-token-never-logged");
    s3.add_credentials(second.clone());
    fakes.issue(
        second.clone(),
        SystemTime::now() + Duration::from_secs(3600),
    );
    assert_ok(&read_one(&client, &object, 10, 10), 10, 10);
    assert_eq!(fakes.calls().container, 2);

    let text = captured(&log);
    assert!(
        text.contains("EcsContainer"),
        "aws-config's trace of the container lookup is captured"
    );
    let container_token = fakes.container_token();
    let secrets = [
        ("first secret key", first.secret_access_key.as_str()),
        (
            "first session token",
            first.session_token.as_deref().unwrap(),
        ),
        ("second secret key", second.secret_access_key.as_str()),
        (
            "second session token",
            second.session_token.as_deref().unwrap(),
        ),
        ("container authorization token", container_token.as_str()),
    ];
    assert_free_of("the trace", &text, &secrets);
    assert_free_of("the trace", &text, &SIGNING_MARKS);
    assert_free_of("the client's Debug", &format!("{client:?}"), &secrets);
}

#[test]
fn environment_keys_and_explicit_secrets_stay_out_of_debug_forms() {
    let log = capture();
    let s3 = S3Mock::start();
    s3.insert_virtual(BUCKET, "a.bin", MIB);
    let env = AwsEnv::new()
        .set("AWS_ACCESS_KEY_ID", "AKIDENVIRONMENTDEBUG")
        .set(
            "AWS_SECRET_ACCESS_KEY",
            "environment/secret/in/debug/000000",
        )
        .set("AWS_SESSION_TOKEN", "environment-token-in-debug");
    let builder = explicit(&s3, &env);
    let client = build(builder.clone());
    assert_ok(
        &read_one(&client, &locate(&client, BUCKET, "a.bin"), 0, 10),
        0,
        10,
    );
    let default = s3.default_credentials();
    let secrets = [
        ("explicit secret key", default.secret_access_key.as_str()),
        (
            "environment secret key",
            "environment/secret/in/debug/000000",
        ),
        ("environment session token", "environment-token-in-debug"),
    ];
    for what in [
        format!("{client:?}"),
        format!("{builder:?}"),
        format!("{:?}", client.snapshot()),
    ] {
        assert_free_of("a Debug form", &what, &secrets);
    }
    assert_free_of("the trace", &captured(&log), &secrets);
}

#[test]
fn query_strings_of_plain_http_reads_are_redacted_from_the_trace() {
    let log = capture();
    let server = MockServer::start();
    server.insert("/object.bin", vec![7u8; 4096]);
    server.add_fault(
        FaultRule::new(Fault::Status {
            code: 503,
            retry_after: None,
        })
        .times(1),
    );
    let env = AwsEnv::new();
    let client = build(support::builder(&env));
    let url = format!(
        "{}?X-Amz-Signature=querysignatureneverlogged&token=querytokenneverlogged",
        server.url("/object.bin")
    );
    let object = client.locate(&url).unwrap();
    let c = read_one(&client, &object, 0, 100);
    assert_eq!(c.status(), Status::Ok, "{c:?}");
    assert_eq!(server.request_count(), 2, "the 503 was retried");
    let c404 = read_one(
        &client,
        &client
            .locate(&format!(
                "{}?sig=querysignatureneverlogged",
                server.url("/missing.bin")
            ))
            .unwrap(),
        0,
        10,
    );
    assert_failed(&c404, Status::NotFound);
    let secrets = [
        ("query signature", "querysignatureneverlogged"),
        ("query token", "querytokenneverlogged"),
    ];
    assert_free_of("the trace", &captured(&log), &secrets);
    for what in [
        format!("{object:?}"),
        format!("{c404:?}"),
        c404.error().unwrap().to_string(),
    ] {
        assert_free_of("a Debug form", &what, &secrets);
    }
}

/// An endpoint from the environment (`AWS_ENDPOINT_URL`, which no configuration check sees)
/// that holds user information or a query fails each read with the reason, before any
/// request, and its secret reaches neither the error nor the trace.
#[test]
fn an_environment_endpoint_with_credentials_or_a_query_fails_its_reads_without_them() {
    let log = capture();
    let s3 = S3Mock::start();
    s3.insert_virtual(BUCKET, "a.bin", MIB);
    let authority = s3.endpoint().trim_start_matches("http://").to_string();
    for (endpoint, why) in [
        (
            format!("http://user:endpointpasswordneverlogged@{authority}"),
            "the S3 endpoint has user information",
        ),
        (
            format!("http://{authority}/?sig=endpointqueryneverlogged"),
            "the S3 endpoint has a query or fragment",
        ),
    ] {
        let env = AwsEnv::new()
            .set("AWS_ENDPOINT_URL", endpoint)
            .set("AWS_ACCESS_KEY_ID", "AKIDENDPOINT")
            .set("AWS_SECRET_ACCESS_KEY", "endpoint/secret/000000");
        let client = build(support::builder(&env).set("s3.region", "us-east-1"));
        let c = read_one(&client, &locate(&client, BUCKET, "a.bin"), 0, 10);
        assert_failed(&c, Status::InvalidArgument);
        let message = c.error().unwrap().to_string();
        assert!(message.contains(why), "{message}");
        let secrets = [
            ("endpoint password", "endpointpasswordneverlogged"),
            ("endpoint query", "endpointqueryneverlogged"),
        ];
        assert_free_of("the error", &format!("{message} {c:?}"), &secrets);
        assert_free_of("the trace", &captured(&log), &secrets);
    }
    assert_eq!(s3.server().request_count(), 0, "nothing was sent");
}
