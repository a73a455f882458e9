//! The two one-time corrections of S3 reads: a wrong-region answer re-prepares the request for
//! the bucket's region once (and the backend remembers it), an expired-token answer invalidates
//! the scoped credential and authenticates once more. A second answer of the same kind for the
//! same read fails it instead of looping.

mod support;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use karu::{CallbackCredential, CanonicalPath, Status};
use karu_testkit::reads::{assert_ok, read_one};
use karu_testkit::{
    CredentialFakes, Gate, GateResponse, MockCredentials, MockServer, RequestHead, S3Mock,
    SignatureFailureKind,
};
use support::{
    AwsEnv, BUCKET, accepted_fakes, assert_no_rejections, build, describe, discovering, explicit,
    key_ids, locate, regions, statuses,
};

const MIB: u64 = 1 << 20;

/// A bucket in eu-west-1 read by a client that signs for us-east-1: the first request is
/// answered with the bucket's region (`status` 400 or 301), the second is signed for it; later
/// reads of the bucket go there directly.
fn wrong_region_is_corrected_once_and_remembered(status: u16) {
    let s3 = S3Mock::builder()
        .wrong_region_status(status)
        .start()
        .unwrap();
    s3.insert_virtual("eu-bucket", "a.bin", MIB);
    s3.set_bucket_region("eu-bucket", "eu-west-1");
    let env = AwsEnv::new();
    let client = build(explicit(&s3, &env));
    let object = locate(&client, "eu-bucket", "a.bin");

    let c = read_one(&client, &object, 1000, 500);
    assert_ok(&c, 1000, 500);
    let log = s3.server().take_requests();
    assert_eq!(statuses(&log), [status, 206], "{}", describe(&log));
    assert_eq!(regions(&log), ["us-east-1", "eu-west-1"]);
    assert_eq!(log[0].range, log[1].range, "the same range, signed again");
    assert_eq!(s3.wrong_region_answers(), 1);
    let failures = s3.take_signature_failures();
    assert_eq!(failures.len(), 1);
    assert_eq!(failures[0].kind, SignatureFailureKind::WrongRegion);

    // Remembered: another read (another object of the bucket, too) goes to eu-west-1 at once.
    let c = read_one(&client, &object, 0, 10);
    assert_ok(&c, 0, 10);
    s3.insert_virtual("eu-bucket", "b.bin", MIB);
    let c = read_one(&client, &locate(&client, "eu-bucket", "b.bin"), 5, 5);
    assert_ok(&c, 5, 5);
    let log = s3.server().requests();
    assert_eq!(statuses(&log), [206, 206], "{}", describe(&log));
    assert_eq!(regions(&log), ["eu-west-1", "eu-west-1"]);
    assert_eq!(s3.wrong_region_answers(), 1);
    assert_no_rejections(&s3);
    assert_eq!(
        client.credential_stats().lookups,
        1,
        "a region is not a scope"
    );
}

#[test]
fn a_wrong_region_400_is_corrected_once_and_remembered() {
    wrong_region_is_corrected_once_and_remembered(400);
}

#[test]
fn a_wrong_region_301_permanent_redirect_is_corrected_once_and_remembered() {
    wrong_region_is_corrected_once_and_remembered(301);
}

/// One bucket name at two endpoints is two buckets: the region learned from one endpoint's
/// wrong-region answer signs later requests to that endpoint only.
#[test]
fn a_region_learned_at_one_endpoint_is_not_used_at_another() {
    let eu = S3Mock::start();
    eu.set_bucket_region(BUCKET, "eu-west-1");
    eu.insert_virtual(BUCKET, "eu/a.bin", MIB);
    let us = S3Mock::start(); // the bucket is in the mock's region, us-east-1
    us.insert_virtual(BUCKET, "us/a.bin", MIB);
    us.add_credentials(eu.default_credentials());
    let env = AwsEnv::new();
    // Signing for us-east-1, at `eu` by default and at `us` for the objects under `us/`.
    let client = build(explicit(&eu, &env).path_set(
        &format!("s3://{BUCKET}/us"),
        "s3.endpoint",
        us.endpoint(),
    ));
    let at_eu = locate(&client, BUCKET, "eu/a.bin");
    let at_us = locate(&client, BUCKET, "us/a.bin");

    // `eu` corrects the region once.
    assert_ok(&read_one(&client, &at_eu, 0, 10), 0, 10);
    let log = eu.server().take_requests();
    assert_eq!(statuses(&log), [400, 206], "{}", describe(&log));
    assert_eq!(regions(&log), ["us-east-1", "eu-west-1"]);

    // `us` is asked with the configured region: what `eu` said of its bucket is not `us`'s.
    assert_ok(&read_one(&client, &at_us, 0, 10), 0, 10);
    let log = us.server().take_requests();
    assert_eq!(statuses(&log), [206], "{}", describe(&log));
    assert_eq!(regions(&log), ["us-east-1"]);

    // Each endpoint keeps its own answer.
    assert_ok(&read_one(&client, &at_eu, 10, 10), 10, 10);
    assert_ok(&read_one(&client, &at_us, 10, 10), 10, 10);
    let (eu_log, us_log) = (eu.server().take_requests(), us.server().take_requests());
    assert_eq!(statuses(&eu_log), [206], "{}", describe(&eu_log));
    assert_eq!(regions(&eu_log), ["eu-west-1"]);
    assert_eq!(statuses(&us_log), [206], "{}", describe(&us_log));
    assert_eq!(regions(&us_log), ["us-east-1"]);
    assert_eq!(
        (eu.wrong_region_answers(), us.wrong_region_answers()),
        (1, 0)
    );
    assert_no_rejections(&us);
}

/// The region an AWS URL names signs the requests of that locator; resolving it changes
/// nothing for other spellings of the bucket.
#[test]
fn the_region_a_url_names_travels_with_its_locator() {
    let s3 = S3Mock::start(); // KARU_BUCKET is in us-east-1
    s3.insert_virtual(BUCKET, "a.bin", MIB);
    s3.set_bucket_region("eu-bucket", "eu-west-1");
    s3.insert_virtual("eu-bucket", "a.bin", MIB);
    let env = AwsEnv::new();
    let client = build(explicit(&s3, &env));

    // A URL naming the wrong region, resolved and never read: nothing is remembered.
    let stale = client
        .locate(&format!(
            "https://{BUCKET}.s3.ap-south-1.amazonaws.com/a.bin"
        ))
        .unwrap();
    assert_eq!(stale.region(), Some("ap-south-1"));
    assert_eq!(stale.canonical().as_str(), format!("s3://{BUCKET}/a.bin"));
    let object = locate(&client, BUCKET, "a.bin");
    assert_eq!(object.region(), None);
    assert_ok(&read_one(&client, &object, 0, 10), 0, 10);
    let log = s3.server().take_requests();
    assert_eq!(statuses(&log), [206], "{}", describe(&log));
    assert_eq!(regions(&log), ["us-east-1"]);

    // A URL naming the bucket's region is signed for it from the first request.
    let by_url = client
        .locate("https://eu-bucket.s3.eu-west-1.amazonaws.com/a.bin")
        .unwrap();
    assert_ok(&read_one(&client, &by_url, 5, 10), 5, 10);
    let log = s3.server().take_requests();
    assert_eq!(statuses(&log), [206], "{}", describe(&log));
    assert_eq!(regions(&log), ["eu-west-1"]);
    assert_eq!(s3.wrong_region_answers(), 0);
    assert_no_rejections(&s3);
}

/// Answers every request as S3 answers a wrong region, naming another region each time.
#[derive(Debug, Default)]
struct EverWrongRegion {
    answered: AtomicUsize,
}

impl Gate for EverWrongRegion {
    fn check(&self, _request: &RequestHead) -> Option<GateResponse> {
        const REGIONS: [&str; 3] = ["eu-west-1", "ap-south-1", "us-west-2"];
        let region = REGIONS[self.answered.fetch_add(1, Ordering::SeqCst) % REGIONS.len()];
        Some(
            GateResponse::new(
                400,
                format!(
                    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>AuthorizationHeaderMalformed</Code><Message>the region is wrong; expecting '{region}'</Message><Region>{region}</Region><RequestId>1</RequestId></Error>"
                ),
            )
            .header("content-type", "application/xml")
            .header("x-amz-bucket-region", region),
        )
    }
}

#[test]
fn a_second_wrong_region_answer_for_the_same_read_fails_it() {
    let server = MockServer::start();
    server.set_gate(Some(Arc::new(EverWrongRegion::default())));
    let env = AwsEnv::new();
    let client = build(
        support::builder(&env)
            .set("s3.endpoint", server.base_url())
            .set("s3.region", "us-east-1")
            .set("s3.access_key_id", "AKIDEXAMPLE")
            .set("s3.secret_access_key", "secret"),
    );
    let c = read_one(&client, &locate(&client, BUCKET, "a.bin"), 0, 10);
    assert!(!c.is_ok(), "{c:?}");
    assert_eq!(c.bytes_received(), 0);
    assert_eq!(c.error().unwrap().http_status(), Some(400), "{c:?}");
    let log = server.requests();
    assert_eq!(
        regions(&log),
        ["us-east-1", "eu-west-1"],
        "corrected once, then given up: {}",
        describe(&log)
    );
}

/// The S3 mock accepting the fakes' first credentials, and a client discovering credentials
/// from the container endpoint of the fakes.
fn container_setup() -> (S3Mock, CredentialFakes, AwsEnv, MockCredentials) {
    let s3 = S3Mock::start();
    s3.insert_virtual(BUCKET, "a.bin", MIB);
    let (fakes, first) = accepted_fakes(&s3);
    let env = AwsEnv::new().container(&fakes, &fakes.container_token());
    (s3, fakes, env, first)
}

fn renewed() -> MockCredentials {
    MockCredentials::new(
        "ASIARENEWEDKEY000001",
        "renewed/secret/key/for/tests/0000000000",
    )
    .with_session_token("renewed-session-token")
}

#[test]
fn an_expired_token_invalidates_the_scoped_credential_and_authenticates_once_more() {
    let (s3, fakes, env, first) = container_setup();
    let client = build(discovering(&s3, &env));
    let object = locate(&client, BUCKET, "a.bin");
    assert_ok(&read_one(&client, &object, 0, 100), 0, 100);
    assert_eq!(fakes.calls().container, 1);

    // The session ends: S3 now answers ExpiredToken for it, the endpoint hands out new keys.
    s3.revoke_credentials(&first.access_key_id);
    let second = renewed();
    s3.add_credentials(second.clone());
    fakes.issue(
        second.clone(),
        SystemTime::now() + Duration::from_secs(3600),
    );
    s3.server().take_requests();

    assert_ok(&read_one(&client, &object, 100, 100), 100, 100);
    let log = s3.server().take_requests();
    assert_eq!(statuses(&log), [400, 206], "{}", describe(&log));
    assert_eq!(
        key_ids(&log),
        [first.access_key_id.as_str(), second.access_key_id.as_str()]
    );
    assert_eq!(
        log[1].header("x-amz-security-token"),
        Some("renewed-session-token")
    );
    assert_eq!(s3.expired_token_answers(), 1);
    assert_eq!(fakes.calls().container, 2, "looked up again, once");
    assert_eq!(client.credential_stats().lookups, 2);

    // The new credential is the scope's now.
    assert_ok(&read_one(&client, &object, 200, 100), 200, 100);
    let log = s3.server().requests();
    assert_eq!(key_ids(&log), [second.access_key_id.as_str()]);
    assert_eq!(fakes.calls().container, 2);
    let failures = s3.signature_failures();
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert_eq!(failures[0].kind, SignatureFailureKind::ExpiredToken);
}

/// A read whose credential expired, and whose renewed credential is expired too: returns its
/// completion after checking that it was tried once with each, and looked up once more.
fn read_with_two_expired_credentials() -> karu::Completion {
    let (s3, fakes, env, first) = container_setup();
    let client = build(discovering(&s3, &env));
    let object = locate(&client, BUCKET, "a.bin");
    assert_ok(&read_one(&client, &object, 0, 100), 0, 100);

    // The renewed credential is already expired too.
    s3.revoke_credentials(&first.access_key_id);
    let second = renewed();
    s3.add_credentials(second.clone());
    s3.revoke_credentials(&second.access_key_id);
    fakes.issue(
        second.clone(),
        SystemTime::now() + Duration::from_secs(3600),
    );
    s3.server().take_requests();

    let c = read_one(&client, &object, 100, 100);
    let log = s3.server().requests();
    assert_eq!(statuses(&log), [400, 400], "{}", describe(&log));
    assert_eq!(
        key_ids(&log),
        [first.access_key_id.as_str(), second.access_key_id.as_str()]
    );
    assert_eq!(fakes.calls().container, 2, "one more lookup, not a loop");
    assert_eq!(s3.expired_token_answers(), 2);
    assert!(!c.is_ok(), "{c:?}");
    assert_eq!(c.bytes_received(), 0);
    assert_eq!(c.error().unwrap().http_status(), Some(400), "{c:?}");
    c
}

#[test]
fn a_second_expired_token_for_the_same_read_fails_it_instead_of_looping() {
    read_with_two_expired_credentials();
}

#[test]
fn a_second_expired_token_is_reported_as_refused_credentials() {
    let c = read_with_two_expired_credentials();
    assert!(
        matches!(c.status(), Status::Credentials | Status::PermissionDenied),
        "credentials refused after a fresh lookup: {c:?}"
    );
}

#[test]
fn an_expired_token_asks_a_prefix_scoped_callback_again() {
    let s3 = S3Mock::start();
    s3.insert_virtual(BUCKET, "a.bin", MIB);
    let first = MockCredentials::new(
        "AKIDCALLBACK00000001",
        "callback/secret/one/000000000000000",
    )
    .with_session_token("callback-token-one");
    s3.add_credentials(first.clone());
    let current = Arc::new(Mutex::new(first.clone()));
    let calls = Arc::new(AtomicU64::new(0));
    let (now, counter) = (Arc::clone(&current), Arc::clone(&calls));
    let callback = move |_: &CanonicalPath| {
        counter.fetch_add(1, Ordering::SeqCst);
        let c = now.lock().unwrap().clone();
        let credential = karu_provider_s3::credential(
            c.access_key_id,
            c.secret_access_key,
            c.session_token,
            None,
        );
        Ok(CallbackCredential::for_prefix(
            credential,
            format!("s3://{BUCKET}"),
        ))
    };
    let env = AwsEnv::new();
    let client = build(discovering(&s3, &env).credential_callback("aws", callback));
    let object = locate(&client, BUCKET, "a.bin");
    assert_ok(&read_one(&client, &object, 0, 10), 0, 10);
    assert_ok(&read_one(&client, &object, 10, 10), 10, 10);
    assert_eq!(calls.load(Ordering::SeqCst), 1);

    s3.revoke_credentials(&first.access_key_id);
    let second = renewed();
    s3.add_credentials(second.clone());
    *current.lock().unwrap() = second.clone();
    s3.server().take_requests();

    assert_ok(&read_one(&client, &object, 20, 10), 20, 10);
    let log = s3.server().requests();
    assert_eq!(statuses(&log), [400, 206], "{}", describe(&log));
    assert_eq!(
        key_ids(&log),
        [first.access_key_id.as_str(), second.access_key_id.as_str()]
    );
    assert_eq!(calls.load(Ordering::SeqCst), 2, "asked again, once");
    let stats = client.credential_stats();
    assert_eq!((stats.callback_calls, stats.lookups), (2, 0), "{stats:?}");
}
