//! S3 reads end to end against the S3 mock, which checks every SigV4 signature on its own:
//! exact bytes (scattered, merged, windowed, at the end of the object), what each request was
//! signed with, anonymous access, requester pays, a wrong secret, awkward keys, and a path rule
//! that makes one bucket anonymous.

mod support;

use karu::{Read, Status};
use karu_testkit::reads::{assert_failed, assert_ok, assert_pattern, drain, read_all, read_one};
use karu_testkit::s3::object_path;
use karu_testkit::{MockCredentials, S3Mock, SignatureFailureKind};
use support::{
    AwsEnv, BUCKET, assert_free_of, assert_no_rejections, build, describe, discovering, explicit,
    key_ids, locate, signed, statuses, with_keys,
};

const MIB: u64 = 1 << 20;
/// A virtual object: its bytes are generated from the offset.
const SIZE: u64 = 64 * MIB;

#[test]
fn scattered_merged_windowed_and_final_reads_arrive_exact_and_every_request_is_signed() {
    let s3 = S3Mock::start();
    s3.insert_virtual(BUCKET, "big.bin", SIZE);
    let env = AwsEnv::new();
    let client = build(explicit(&s3, &env));
    let object = locate(&client, BUCKET, "big.bin");

    // Far apart (own requests), neighbours (merged), the first and the last byte.
    let reads = [
        (0, 1),
        (SIZE - 1, 1),
        (12_345, 67_891),
        (MIB, 4096),
        (MIB + 8192, 4096),
        (MIB + 20_000, 1),
        (40 * MIB + 7, 100_003),
    ];
    let batch = client.submit(reads.iter().map(|&(o, l)| Read::new(&object, o, l)));
    let transfers = batch.stats().transfers;
    let done = drain(&batch);
    for (c, &(o, l)) in done.iter().zip(&reads) {
        assert_ok(c, o, l);
    }
    let log = s3.server().requests();
    assert_eq!(log.len(), transfers, "{}", describe(&log));
    assert!(transfers < reads.len(), "neighbours merged: {transfers}");

    // A window: offsets relative to its start, bytes from the object's.
    let window = object.with_window(10 * MIB, Some(MIB)).unwrap();
    let c = read_one(&client, &window, 100, 50);
    assert_ok(&c, 10 * MIB + 100, 50);
    let c = read_one(&client, &window, MIB - 10, 10);
    assert_ok(&c, 11 * MIB - 10, 10);

    // Past the end: the bytes that exist, and the status that says so.
    let c = read_one(&client, &object, SIZE - 10, 100);
    assert_eq!(c.status(), Status::RangeNotSatisfiable, "{c:?}");
    assert_eq!(c.bytes_received(), 10);
    assert_pattern(&c.bytes()[..10], SIZE - 10, 10);

    let log = s3.server().requests();
    assert_no_rejections(&s3);
    assert!(log.len() >= transfers + 3, "{}", describe(&log));
    for r in &log {
        assert_eq!(r.path, object_path(BUCKET, "big.bin"));
        let auth = r.header("authorization").expect("every request is signed");
        assert!(
            auth.starts_with("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
                && auth.contains("/us-east-1/s3/aws4_request"),
            "{auth}"
        );
        let s = signed(r).unwrap();
        for h in ["host", "range", "x-amz-content-sha256", "x-amz-date"] {
            assert!(s.headers.iter().any(|x| x == h), "{h} signed: {s:?}");
        }
        assert_eq!(r.header("x-amz-content-sha256"), Some("UNSIGNED-PAYLOAD"));
    }
    assert_eq!(client.credential_stats().lookups, 1);
}

#[test]
fn anonymous_reads_of_a_public_bucket_are_unsigned_and_look_nothing_up() {
    let s3 = S3Mock::start();
    s3.insert_virtual("public-bucket", "open.bin", MIB);
    s3.set_public("public-bucket", true);
    let env = AwsEnv::new();
    let client = build(discovering(&s3, &env).set("s3.anonymous", true));
    let object = locate(&client, "public-bucket", "open.bin");
    let done = read_all(&client, &object, &[(5, 1000), (MIB - 7, 7)]);
    assert_ok(&done[0], 5, 1000);
    assert_ok(&done[1], MIB - 7, 7);

    let log = s3.server().requests();
    assert_eq!(log.len(), 2, "{}", describe(&log));
    for r in &log {
        assert_eq!(r.header("authorization"), None, "{}", describe(&log));
        assert_eq!(r.header("x-amz-security-token"), None);
        assert_eq!(r.status, 206);
    }
    assert_no_rejections(&s3);
    let stats = client.credential_stats();
    assert_eq!((stats.lookups, stats.callback_calls), (0, 0), "{stats:?}");
}

#[test]
fn an_anonymous_read_of_a_private_bucket_is_permission_denied_once() {
    let s3 = S3Mock::start();
    s3.insert_virtual(BUCKET, "closed.bin", MIB);
    let env = AwsEnv::new();
    let client = build(discovering(&s3, &env).set("s3.anonymous", true));
    let c = read_one(&client, &locate(&client, BUCKET, "closed.bin"), 0, 10);
    assert_failed(&c, Status::PermissionDenied);
    assert_eq!(c.error().unwrap().http_status(), Some(403));

    let log = s3.server().requests();
    assert_eq!(statuses(&log), [403], "not retried: {}", describe(&log));
    assert_eq!(log[0].header("authorization"), None);
    let failures = s3.signature_failures();
    assert_eq!(failures.len(), 1);
    assert_eq!(
        failures[0].kind,
        SignatureFailureKind::MissingAuthentication
    );
}

#[test]
fn requester_pays_sends_the_header_signed_and_without_it_access_is_denied() {
    let s3 = S3Mock::start();
    s3.insert_virtual("payer-bucket", "data.bin", MIB);
    s3.set_requester_pays("payer-bucket", true);
    let env = AwsEnv::new();

    let paying = build(explicit(&s3, &env).set("s3.requester_pays", true));
    let c = read_one(
        &paying,
        &locate(&paying, "payer-bucket", "data.bin"),
        100,
        200,
    );
    assert_ok(&c, 100, 200);
    let log = s3.server().take_requests();
    assert_eq!(statuses(&log), [206], "{}", describe(&log));
    assert_eq!(log[0].header("x-amz-request-payer"), Some("requester"));
    let s = signed(&log[0]).unwrap();
    assert!(
        s.headers.iter().any(|h| h == "x-amz-request-payer"),
        "the requester-pays header is signed: {s:?}"
    );
    assert_no_rejections(&s3);

    let not_paying = build(explicit(&s3, &env));
    let c = read_one(
        &not_paying,
        &locate(&not_paying, "payer-bucket", "data.bin"),
        100,
        200,
    );
    assert_failed(&c, Status::PermissionDenied);
    let log = s3.server().requests();
    assert_eq!(statuses(&log), [403], "not retried: {}", describe(&log));
    assert_eq!(log[0].header("x-amz-request-payer"), None);
    let failures = s3.signature_failures();
    assert_eq!(failures.len(), 1);
    assert_eq!(failures[0].kind, SignatureFailureKind::RequesterPaysMissing);
}

#[test]
fn a_wrong_secret_is_permission_denied_not_retried_and_its_message_reveals_nothing_signed() {
    let s3 = S3Mock::start();
    s3.insert_virtual(BUCKET, "a.bin", MIB);
    let env = AwsEnv::new();
    let wrong = MockCredentials::new("AKIDEXAMPLE", "this-is-the-wrong-secret-0123456789");
    let client = build(with_keys(&s3, &env, &wrong));
    let c = read_one(&client, &locate(&client, BUCKET, "a.bin"), 0, 100);
    assert_failed(&c, Status::PermissionDenied);
    let error = c.error().unwrap();
    assert_eq!(error.http_status(), Some(403));

    let log = s3.server().requests();
    assert_eq!(
        statuses(&log),
        [403],
        "exactly one request: {}",
        describe(&log)
    );
    let failures = s3.signature_failures();
    assert_eq!(failures.len(), 1);
    assert_eq!(failures[0].kind, SignatureFailureKind::SignatureMismatch);

    // The mock's answer echoes the string to sign, the canonical request and the signature
    // provided, as S3 does; none of it reaches the error.
    let auth = log[0].header("authorization").unwrap();
    let signature = auth.rsplit("Signature=").next().unwrap();
    assert_eq!(signature.len(), 64, "{auth}");
    for text in [
        error.message().to_string(),
        format!("{error:?}"),
        format!("{c:?}"),
    ] {
        assert_free_of(
            "the error",
            &text,
            &[
                ("signature", signature),
                ("wrong secret", &wrong.secret_access_key),
                ("authorization scheme", "AWS4-HMAC-SHA256"),
                ("string to sign", "StringToSign"),
                ("canonical request", "CanonicalRequest"),
                ("signature element", "SignatureProvided"),
            ],
        );
    }
    assert!(
        error.message().contains("SignatureDoesNotMatch"),
        "the S3 code is kept: {}",
        error.message()
    );
}

#[test]
fn keys_with_spaces_plus_signs_and_unicode_round_trip() {
    let s3 = S3Mock::start();
    let key = "dir/a b+c/ü.bin";
    let body: Vec<u8> = (0..5000u32).map(|i| (i * 7 % 251) as u8).collect();
    s3.insert(BUCKET, key, body.clone());
    let env = AwsEnv::new();
    let client = build(explicit(&s3, &env));
    let object = locate(&client, BUCKET, key);
    assert_eq!(object.key(), key);
    assert_eq!(object.canonical().as_str(), format!("s3://{BUCKET}/{key}"));
    let done = read_all(&client, &object, &[(0, 5000)]);
    assert_eq!(done[0].status(), Status::Ok, "{:?}", done[0]);
    assert_eq!(done[0].bytes(), &body[..]);

    let log = s3.server().requests();
    assert_eq!(statuses(&log), [206], "{}", describe(&log));
    assert_eq!(log[0].path, "/karu-bucket/dir/a%20b%2Bc/%C3%BC.bin");
    assert_eq!(log[0].path, object_path(BUCKET, key));
    assert_no_rejections(&s3);
}

#[test]
fn a_path_rule_makes_one_bucket_anonymous_and_no_other() {
    let s3 = S3Mock::start();
    for bucket in [BUCKET, "other-bucket", "other-bucket-2"] {
        s3.insert_virtual(bucket, "k.bin", MIB);
    }
    // Public, so that an unsigned request is answered; signed ones are checked anyway.
    s3.set_public("other-bucket", true);
    let env = AwsEnv::new();
    let client = build(explicit(&s3, &env).path_set("s3://other-bucket", "s3.anonymous", true));
    for bucket in [BUCKET, "other-bucket", "other-bucket-2"] {
        let c = read_one(&client, &locate(&client, bucket, "k.bin"), 10, 10);
        assert_ok(&c, 10, 10);
    }
    let log = s3.server().requests();
    assert_eq!(
        key_ids(&log),
        ["AKIDEXAMPLE", "-", "AKIDEXAMPLE"],
        "only other-bucket (whole segments) is read unsigned: {}",
        describe(&log)
    );
    assert_no_rejections(&s3);
    // The two signed buckets share the one global credential.
    assert_eq!(client.credential_stats().lookups, 1);
}
