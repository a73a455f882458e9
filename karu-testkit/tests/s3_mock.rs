//! The S3 mock: correctly signed reads get exact bytes, every kind of bad signature gets the
//! answer S3 gives and is recorded, and the S3 behaviours a provider must handle (wrong region,
//! expired token, public and requester-pays buckets) are there. Requests are signed by the
//! tests' own SigV4 signer (`support/sigv4.rs`), independent of the mock's verifier.

mod support;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use karu_testkit::s3::object_path;
use karu_testkit::{
    Fault, FaultRule, MockCredentials, S3Mock, SignatureFailureKind as Kind, pattern,
};
use support::sigv4::{EMPTY_SHA256, Signer, amz_date, borrowed, remove, replace};
use support::{BodyEnd, Client, Response, xml};

/// Sends `method target` with these headers on a new connection.
fn send(s3: &S3Mock, method: &str, target: &str, headers: &[(String, String)]) -> Response {
    Client::connect(s3.server().addr())
        .request(method, target, &borrowed(headers))
        .expect("a response")
}

/// Signs and sends a request for `path` (and `query`).
fn signed(
    s3: &S3Mock,
    signer: &Signer,
    method: &str,
    path: &str,
    query: Option<&str>,
    extra: &[(&str, &str)],
) -> Response {
    let headers = signer.sign(method, path, query, extra);
    let target = query.map_or_else(|| path.to_owned(), |q| format!("{path}?{q}"));
    send(s3, method, &target, &headers)
}

/// The `<Code>` of an S3 error document, checking the document's shape on the way.
fn code(r: &Response) -> String {
    assert_eq!(
        r.header("content-type"),
        Some("application/xml"),
        "status {}",
        r.status
    );
    let request_id = xml::text(&r.body, "Error/RequestId").expect("<RequestId>");
    assert!(!request_id.is_empty());
    assert_eq!(r.header("x-amz-request-id"), Some(request_id.as_str()));
    assert!(xml::text(&r.body, "Error/Message").is_some_and(|m| !m.is_empty()));
    xml::text(&r.body, "Error/Code").expect("<Code>")
}

fn mock_with_object(len: usize) -> (S3Mock, Vec<u8>) {
    let s3 = S3Mock::start();
    let data = pattern(0, len);
    s3.insert("bucket", "dir/data.bin", data.clone());
    (s3, data)
}

#[test]
fn the_test_signer_formats_dates_like_sigv4() {
    let t = UNIX_EPOCH + Duration::from_secs(1_440_938_160);
    assert_eq!(amz_date(t), "20150830T123600Z");
    let t = UNIX_EPOCH + Duration::from_secs(1_369_353_600);
    assert_eq!(amz_date(t), "20130524T000000Z");
}

#[test]
fn a_signed_range_get_gets_exact_bytes_with_206() {
    let s3 = S3Mock::start();
    s3.insert_virtual("bucket", "big.bin", 1 << 30);
    let signer = Signer::new(s3.default_credentials(), &s3.region());
    let path = object_path("bucket", "big.bin");
    let r = signed(
        &s3,
        &signer,
        "GET",
        &path,
        None,
        &[("Range", "bytes=1000-1999")],
    );
    assert_eq!(r.status, 206);
    assert_eq!(
        r.header("content-range"),
        Some("bytes 1000-1999/1073741824")
    );
    assert_eq!(r.body, pattern(1000, 1000));
    assert_eq!(r.end, BodyEnd::Complete);

    // The SDK's `x-id=GetObject` query is part of the signature, not of the object's name;
    // the empty-body hash is accepted like UNSIGNED-PAYLOAD.
    let mut empty_hash = signer.clone();
    empty_hash.payload_hash = EMPTY_SHA256.to_owned();
    let r = signed(
        &s3,
        &empty_hash,
        "GET",
        &path,
        Some("x-id=GetObject"),
        &[("Range", "bytes=0-9")],
    );
    assert_eq!(
        (r.status, r.body.as_slice()),
        (206, pattern(0, 10).as_slice())
    );
    let head = signed(&s3, &signer, "HEAD", &path, None, &[]);
    assert_eq!((head.status, head.content_length()), (200, Some(1 << 30)));

    let log = s3.server().requests();
    assert_eq!(
        log.iter()
            .map(|r| (r.status, r.byte_range))
            .collect::<Vec<_>>(),
        [(206, Some((1000, 1999))), (206, Some((0, 9))), (200, None)]
    );
    assert!(log.iter().all(|r| r.path == "/bucket/big.bin"));
    assert!(log.iter().all(|r| r.header("authorization").is_some()));
    assert!(s3.signature_failures().is_empty());
}

#[test]
fn a_session_token_and_a_range_are_signed_together() {
    let (s3, data) = mock_with_object(5000);
    let creds = MockCredentials::new("ASIATEMPORARY", "temporary/secret")
        .with_session_token("FwoGZXIvYXdzEXAMPLE//token==");
    s3.add_credentials(creds.clone());
    let signer = Signer::new(creds.clone(), "us-east-1");
    let path = object_path("bucket", "dir/data.bin");
    let r = signed(
        &s3,
        &signer,
        "GET",
        &path,
        None,
        &[("Range", "bytes=100-4099")],
    );
    assert_eq!(r.status, 206);
    assert_eq!(r.body, &data[100..4100]);
    let log = s3.server().requests();
    assert_eq!(
        log[0].header("x-amz-security-token"),
        Some("FwoGZXIvYXdzEXAMPLE//token==")
    );
    let auth = log[0].header("authorization").unwrap();
    assert!(
        auth.contains(
            "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date;x-amz-security-token"
        ),
        "{auth}"
    );

    // Without the token the temporary key is unknown; with another token it is invalid.
    let mut headers = signer.sign("GET", &path, None, &[("Range", "bytes=0-9")]);
    remove(&mut headers, "x-amz-security-token");
    let r = send(&s3, "GET", &path, &headers);
    assert_eq!((r.status, code(&r)), (403, "InvalidAccessKeyId".to_owned()));
    let other = Signer::new(
        creds.clone().with_session_token("another-token"),
        "us-east-1",
    );
    let r = signed(&s3, &other, "GET", &path, None, &[]);
    assert_eq!((r.status, code(&r)), (400, "InvalidToken".to_owned()));
    // A long-term key must not carry a token at all.
    let stray = Signer::new(
        s3.default_credentials().with_session_token("x"),
        "us-east-1",
    );
    let r = signed(&s3, &stray, "GET", &path, None, &[]);
    assert_eq!((r.status, code(&r)), (400, "InvalidToken".to_owned()));
    // ... and an unsigned token is an unsigned x-amz-* header.
    let mut headers =
        Signer::new(s3.default_credentials(), "us-east-1").sign("GET", &path, None, &[]);
    headers.push(("x-amz-security-token".into(), "whatever".into()));
    let r = send(&s3, "GET", &path, &headers);
    assert_eq!((r.status, code(&r)), (403, "AccessDenied".to_owned()));
    assert_eq!(
        xml::text(&r.body, "Error/HeadersNotSigned").as_deref(),
        Some("x-amz-security-token")
    );

    let kinds: Vec<Kind> = s3.signature_failures().iter().map(|f| f.kind).collect();
    assert_eq!(
        kinds,
        [
            Kind::MissingSecurityToken,
            Kind::InvalidSecurityToken,
            Kind::InvalidSecurityToken,
            Kind::UnsignedHeader
        ]
    );
}

#[test]
fn a_range_changed_after_signing_does_not_match_and_the_answer_explains_why() {
    let (s3, _) = mock_with_object(1000);
    let signer = Signer::new(s3.default_credentials(), "us-east-1");
    let path = object_path("bucket", "dir/data.bin");
    let mut headers = signer.sign("GET", &path, None, &[("Range", "bytes=0-9")]);
    replace(&mut headers, "range", "bytes=0-999");
    let r = send(&s3, "GET", &path, &headers);
    assert_eq!(
        (r.status, code(&r)),
        (403, "SignatureDoesNotMatch".to_owned())
    );
    assert!(r.body.len() < 4096);

    // Like S3, the body shows what the server signed: the client must redact it.
    let canonical = xml::text(&r.body, "Error/CanonicalRequest").unwrap();
    assert!(
        canonical.starts_with(&format!(
            "GET\n{path}\n\nhost:127.0.0.1\nrange:bytes=0-999\n"
        )),
        "{canonical}"
    );
    assert!(canonical.ends_with("\nhost;range;x-amz-content-sha256;x-amz-date\nUNSIGNED-PAYLOAD"));
    let string_to_sign = xml::text(&r.body, "Error/StringToSign").unwrap();
    let date = headers
        .iter()
        .find(|(n, _)| n == "x-amz-date")
        .unwrap()
        .1
        .clone();
    assert!(string_to_sign.starts_with(&format!(
        "AWS4-HMAC-SHA256\n{date}\n{}/us-east-1/s3/aws4_request\n",
        &date[..8]
    )));
    let provided = xml::text(&r.body, "Error/SignatureProvided").unwrap();
    let auth = headers
        .iter()
        .find(|(n, _)| n == "authorization")
        .unwrap()
        .1
        .clone();
    assert!(auth.ends_with(&format!("Signature={provided}")));
    assert_eq!(
        xml::text(&r.body, "Error/AWSAccessKeyId").as_deref(),
        Some("AKIDEXAMPLE")
    );
    let bytes = xml::text(&r.body, "Error/CanonicalRequestBytes").unwrap();
    assert!(bytes.starts_with("47 45 54 0a"), "{bytes}");

    let failures = s3.signature_failures();
    assert_eq!(failures.len(), 1);
    let f = &failures[0];
    assert_eq!(f.kind, Kind::SignatureMismatch);
    assert_eq!(f.access_key_id.as_deref(), Some("AKIDEXAMPLE"));
    assert_eq!(
        (f.method.as_str(), f.path.as_str(), f.status),
        ("GET", path.as_str(), 403)
    );
    assert_eq!(f.code, "SignatureDoesNotMatch");
    let recorded = format!("{failures:?}");
    let secret = s3.default_credentials().secret_access_key;
    assert!(
        !recorded.contains(&secret) && !recorded.contains(&provided),
        "{recorded}"
    );
    // The object handler never saw it: no bytes went out.
    assert_eq!(s3.server().requests()[0].body_bytes, r.body.len() as u64);
}

#[test]
fn a_wrong_secret_or_a_tampered_signed_header_does_not_match() {
    let (s3, _) = mock_with_object(100);
    let path = object_path("bucket", "dir/data.bin");
    let wrong = Signer::new(
        MockCredentials::new("AKIDEXAMPLE", "not-the-secret"),
        "us-east-1",
    );
    let r = signed(&s3, &wrong, "GET", &path, None, &[]);
    assert_eq!(
        (r.status, code(&r)),
        (403, "SignatureDoesNotMatch".to_owned())
    );

    let signer = Signer::new(s3.default_credentials(), "us-east-1");
    let mut headers = signer.sign("GET", &path, None, &[("x-amz-meta-note", "signed")]);
    replace(&mut headers, "x-amz-meta-note", "changed");
    let r = send(&s3, "GET", &path, &headers);
    assert_eq!(
        (r.status, code(&r)),
        (403, "SignatureDoesNotMatch".to_owned())
    );

    // The path and the query are signed too.
    let headers = signer.sign("GET", &path, Some("x-id=GetObject"), &[]);
    let r = send(&s3, "GET", &format!("{path}?x-id=PutObject"), &headers);
    assert_eq!(
        (r.status, code(&r)),
        (403, "SignatureDoesNotMatch".to_owned())
    );
    s3.insert("bucket", "other.bin", vec![0u8; 10]);
    let r = send(
        &s3,
        "GET",
        &object_path("bucket", "other.bin"),
        &signer.sign("GET", &path, None, &[]),
    );
    assert_eq!(
        (r.status, code(&r)),
        (403, "SignatureDoesNotMatch".to_owned())
    );

    // Extra spaces inside a signed header value do not matter (values are trimmed and
    // collapsed on both sides), a missing signed header does.
    let headers = signer.sign("GET", &path, None, &[("x-amz-meta-note", "a   b")]);
    assert_eq!(send(&s3, "GET", &path, &headers).status, 200);
    let mut headers = signer.sign("GET", &path, None, &[("Range", "bytes=0-1")]);
    remove(&mut headers, "range");
    let r = send(&s3, "GET", &path, &headers);
    assert_eq!(
        (r.status, code(&r)),
        (403, "SignatureDoesNotMatch".to_owned())
    );

    let kinds: Vec<Kind> = s3.signature_failures().iter().map(|f| f.kind).collect();
    assert_eq!(
        kinds,
        [
            Kind::SignatureMismatch,
            Kind::SignatureMismatch,
            Kind::SignatureMismatch,
            Kind::SignatureMismatch,
            Kind::SignedHeaderMissing
        ]
    );
}

#[test]
fn unknown_keys_and_missing_authentication_are_refused() {
    let (s3, _) = mock_with_object(100);
    let path = object_path("bucket", "dir/data.bin");
    let stranger = Signer::new(MockCredentials::new("AKIASTRANGER", "x"), "us-east-1");
    let r = signed(&s3, &stranger, "GET", &path, None, &[]);
    assert_eq!((r.status, code(&r)), (403, "InvalidAccessKeyId".to_owned()));
    assert_eq!(
        xml::text(&r.body, "Error/AWSAccessKeyId").as_deref(),
        Some("AKIASTRANGER")
    );

    let r = send(&s3, "GET", &path, &[]);
    assert_eq!((r.status, code(&r)), (403, "AccessDenied".to_owned()));

    // Presigned URLs are not supported, and say so.
    let r = send(
        &s3,
        "GET",
        &format!("{path}?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=00"),
        &[],
    );
    assert_eq!((r.status, code(&r)), (403, "AccessDenied".to_owned()));
    assert!(
        xml::text(&r.body, "Error/Message")
            .unwrap()
            .contains("presigned")
    );

    // Signature Version 2 and garbage.
    let r = send(
        &s3,
        "GET",
        &path,
        &[(
            "authorization".into(),
            "AWS AKIDEXAMPLE:c2lnbmF0dXJl".into(),
        )],
    );
    assert_eq!((r.status, code(&r)), (400, "InvalidRequest".to_owned()));
    let r = send(
        &s3,
        "GET",
        &path,
        &[(
            "authorization".into(),
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE".into(),
        )],
    );
    assert_eq!(
        (r.status, code(&r)),
        (400, "AuthorizationHeaderMalformed".to_owned())
    );
    // `host` must be signed.
    let mut no_host = Signer::new(s3.default_credentials(), "us-east-1");
    no_host.skip_host = true;
    let r = signed(&s3, &no_host, "GET", &path, None, &[]);
    assert_eq!(
        (r.status, code(&r)),
        (400, "AuthorizationHeaderMalformed".to_owned())
    );
    // Another service's scope.
    let mut ec2 = Signer::new(s3.default_credentials(), "us-east-1");
    ec2.service = "ec2".into();
    let r = signed(&s3, &ec2, "GET", &path, None, &[]);
    assert_eq!(
        (r.status, code(&r)),
        (400, "AuthorizationHeaderMalformed".to_owned())
    );

    let failures = s3.signature_failures();
    assert_eq!(
        failures.iter().map(|f| f.kind).collect::<Vec<_>>(),
        [
            Kind::UnknownAccessKey,
            Kind::MissingAuthentication,
            Kind::PresignedUnsupported,
            Kind::MalformedAuthorization,
            Kind::MalformedAuthorization,
            Kind::MalformedAuthorization,
            Kind::MalformedAuthorization
        ]
    );
    assert_eq!(failures[0].access_key_id.as_deref(), Some("AKIASTRANGER"));
    assert_eq!(failures[1].access_key_id, None);
    assert!(s3.server().requests().iter().all(|r| r.status >= 400));
}

#[test]
fn stale_and_inconsistent_dates_are_too_skewed() {
    let (s3, _) = mock_with_object(100);
    let path = object_path("bucket", "dir/data.bin");
    let mut old = Signer::new(s3.default_credentials(), "us-east-1");
    old.time = SystemTime::now() - Duration::from_secs(20 * 60);
    let r = signed(&s3, &old, "GET", &path, None, &[]);
    assert_eq!(
        (r.status, code(&r)),
        (403, "RequestTimeTooSkewed".to_owned())
    );
    assert_eq!(
        xml::text(&r.body, "Error/MaxAllowedSkewMilliseconds").as_deref(),
        Some("900000")
    );
    assert_eq!(
        xml::text(&r.body, "Error/RequestTime"),
        Some(amz_date(old.time))
    );
    assert!(xml::text(&r.body, "Error/ServerTime").is_some());

    let mut future = old.clone();
    future.time = SystemTime::now() + Duration::from_secs(20 * 60);
    assert_eq!(signed(&s3, &future, "GET", &path, None, &[]).status, 403);
    // Ten minutes off is within S3's 15.
    let mut near = old.clone();
    near.time = SystemTime::now() - Duration::from_secs(10 * 60);
    assert_eq!(signed(&s3, &near, "GET", &path, None, &[]).status, 200);

    // A scope date that is not x-amz-date's day.
    let mut other_day = Signer::new(s3.default_credentials(), "us-east-1");
    other_day.scope_date = Some("20000101".into());
    let r = signed(&s3, &other_day, "GET", &path, None, &[]);
    assert_eq!(
        (r.status, code(&r)),
        (403, "RequestTimeTooSkewed".to_owned())
    );

    // A missing x-amz-date.
    let mut headers =
        Signer::new(s3.default_credentials(), "us-east-1").sign("GET", &path, None, &[]);
    remove(&mut headers, "x-amz-date");
    let r = send(&s3, "GET", &path, &headers);
    assert_eq!((r.status, code(&r)), (403, "AccessDenied".to_owned()));

    // The mock's clock can be moved instead: a fresh signature is then stale.
    s3.set_clock_offset(3600);
    let fresh = Signer::new(s3.default_credentials(), "us-east-1");
    assert_eq!(signed(&s3, &fresh, "GET", &path, None, &[]).status, 403);
    s3.set_clock_offset(0);
    assert_eq!(signed(&s3, &fresh, "GET", &path, None, &[]).status, 200);

    assert_eq!(
        s3.signature_failures()
            .iter()
            .map(|f| f.kind)
            .collect::<Vec<_>>(),
        [
            Kind::RequestTimeTooSkewed,
            Kind::RequestTimeTooSkewed,
            Kind::ScopeDateMismatch,
            Kind::MissingDate,
            Kind::RequestTimeTooSkewed
        ]
    );
}

#[test]
fn the_wrong_region_gets_400_with_the_bucket_region() {
    let s3 = S3Mock::start();
    s3.set_bucket_region("eu-bucket", "eu-west-1");
    s3.insert("eu-bucket", "k", pattern(0, 100));
    let path = object_path("eu-bucket", "k");
    let us = Signer::new(s3.default_credentials(), "us-east-1");
    let r = signed(&s3, &us, "GET", &path, None, &[("Range", "bytes=0-9")]);
    assert_eq!(
        (r.status, code(&r)),
        (400, "AuthorizationHeaderMalformed".to_owned())
    );
    assert_eq!(
        xml::text(&r.body, "Error/Region").as_deref(),
        Some("eu-west-1")
    );
    assert_eq!(r.header("x-amz-bucket-region"), Some("eu-west-1"));
    // HEAD gets the header without a body.
    let head = signed(&s3, &us, "HEAD", &path, None, &[]);
    assert_eq!(
        (head.status, head.header("x-amz-bucket-region")),
        (400, Some("eu-west-1"))
    );
    assert!(head.body.is_empty());
    // Re-signed for the bucket's region, it works.
    let eu = Signer::new(s3.default_credentials(), "eu-west-1");
    let r = signed(&s3, &eu, "GET", &path, None, &[("Range", "bytes=0-9")]);
    assert_eq!(
        (r.status, r.body.as_slice()),
        (206, pattern(0, 10).as_slice())
    );
    assert_eq!(s3.wrong_region_answers(), 2);

    // HeadBucket tells the region to a correctly signed request; GetBucketLocation answers
    // whatever region it was signed for, as on S3.
    let r = signed(&s3, &eu, "HEAD", "/eu-bucket", None, &[]);
    assert_eq!(
        (r.status, r.header("x-amz-bucket-region")),
        (200, Some("eu-west-1"))
    );
    let r = signed(&s3, &us, "GET", "/eu-bucket", Some("location"), &[]);
    assert_eq!(r.status, 200);
    assert_eq!(
        xml::text(&r.body, "LocationConstraint").as_deref(),
        Some("eu-west-1")
    );
    assert_eq!(s3.wrong_region_answers(), 2);
    let failures = s3.signature_failures();
    assert_eq!(failures.len(), 2);
    assert!(failures.iter().all(|f| f.kind == Kind::WrongRegion));
    assert!(
        failures[0].detail.contains("eu-west-1"),
        "{}",
        failures[0].detail
    );
}

#[test]
fn the_wrong_region_can_be_a_301_permanent_redirect() {
    let s3 = S3Mock::builder()
        .region("us-west-2")
        .wrong_region_status(301)
        .start()
        .unwrap();
    assert_eq!(s3.region(), "us-west-2");
    s3.insert("b", "k", vec![1u8; 10]);
    s3.set_bucket_region("b", "ap-southeast-2");
    let path = object_path("b", "k");
    let r = signed(
        &s3,
        &Signer::new(s3.default_credentials(), "us-west-2"),
        "GET",
        &path,
        None,
        &[],
    );
    assert_eq!((r.status, code(&r)), (301, "PermanentRedirect".to_owned()));
    assert_eq!(r.header("x-amz-bucket-region"), Some("ap-southeast-2"));
    assert_eq!(r.header("location"), None);
    assert_eq!(xml::text(&r.body, "Error/Bucket").as_deref(), Some("b"));
    assert_eq!(
        xml::text(&r.body, "Error/Endpoint").as_deref(),
        Some("127.0.0.1")
    );
    assert_eq!(s3.wrong_region_answers(), 1);
    let ok = Signer::new(s3.default_credentials(), "ap-southeast-2");
    assert_eq!(signed(&s3, &ok, "GET", &path, None, &[]).status, 200);
}

#[test]
fn a_revoked_key_gets_expired_token_until_it_is_added_again() {
    let (s3, _) = mock_with_object(100);
    let creds = MockCredentials::new("ASIAREVOKED", "s").with_session_token("session-1");
    s3.add_credentials(creds.clone());
    let signer = Signer::new(creds.clone(), "us-east-1");
    let path = object_path("bucket", "dir/data.bin");
    assert_eq!(signed(&s3, &signer, "GET", &path, None, &[]).status, 200);
    s3.revoke_credentials("ASIAREVOKED");
    let r = signed(&s3, &signer, "GET", &path, None, &[]);
    assert_eq!((r.status, code(&r)), (400, "ExpiredToken".to_owned()));
    assert_eq!(
        xml::text(&r.body, "Error/Token-0").as_deref(),
        Some("session-1")
    );
    assert_eq!(s3.expired_token_answers(), 1);
    let f = &s3.signature_failures()[0];
    assert_eq!(
        (f.kind, f.access_key_id.as_deref()),
        (Kind::ExpiredToken, Some("ASIAREVOKED"))
    );

    // A refreshed credential (same key, new token) is accepted again.
    let refreshed = creds.with_session_token("session-2");
    s3.add_credentials(refreshed.clone());
    let signer = Signer::new(refreshed, "us-east-1");
    assert_eq!(signed(&s3, &signer, "GET", &path, None, &[]).status, 200);
    assert_eq!(s3.expired_token_answers(), 1);
}

#[test]
fn public_buckets_allow_anonymous_reads_only() {
    let s3 = S3Mock::start();
    s3.insert("open", "a.bin", pattern(0, 300));
    s3.set_public("open", true);
    let path = object_path("open", "a.bin");
    let r = send(&s3, "GET", &path, &[("Range".into(), "bytes=10-19".into())]);
    assert_eq!(
        (r.status, r.body.as_slice()),
        (206, pattern(10, 10).as_slice())
    );
    assert_eq!(send(&s3, "HEAD", &path, &[]).status, 200);
    assert_eq!(
        send(&s3, "GET", &object_path("open", "missing"), &[]).status,
        404
    );
    // Signed requests are still checked.
    let wrong = Signer::new(MockCredentials::new("AKIDEXAMPLE", "wrong"), "us-east-1");
    assert_eq!(signed(&s3, &wrong, "GET", &path, None, &[]).status, 403);
    // Anonymous writes are not reads.
    let r = send(&s3, "PUT", &path, &[]);
    assert_eq!((r.status, code(&r)), (403, "AccessDenied".to_owned()));
    s3.set_public("open", false);
    assert_eq!(send(&s3, "GET", &path, &[]).status, 403);
    assert_eq!(
        s3.signature_failures()
            .iter()
            .map(|f| f.kind)
            .collect::<Vec<_>>(),
        [
            Kind::SignatureMismatch,
            Kind::MissingAuthentication,
            Kind::MissingAuthentication
        ]
    );
}

#[test]
fn requester_pays_needs_the_signed_request_payer_header() {
    let (s3, data) = mock_with_object(100);
    s3.set_requester_pays("bucket", true);
    let signer = Signer::new(s3.default_credentials(), "us-east-1");
    let path = object_path("bucket", "dir/data.bin");
    let r = signed(&s3, &signer, "GET", &path, None, &[]);
    assert_eq!((r.status, code(&r)), (403, "AccessDenied".to_owned()));
    let r = signed(
        &s3,
        &signer,
        "GET",
        &path,
        None,
        &[("x-amz-request-payer", "requester"), ("Range", "bytes=0-9")],
    );
    assert_eq!((r.status, r.body.as_slice()), (206, &data[..10]));
    // Sent but not signed.
    let mut headers = signer.sign("GET", &path, None, &[]);
    headers.push(("x-amz-request-payer".into(), "requester".into()));
    let r = send(&s3, "GET", &path, &headers);
    assert_eq!((r.status, code(&r)), (403, "AccessDenied".to_owned()));
    assert_eq!(
        xml::text(&r.body, "Error/HeadersNotSigned").as_deref(),
        Some("x-amz-request-payer")
    );
    // Anonymous reads of a public requester-pays bucket are refused too.
    s3.set_public("bucket", true);
    assert_eq!(send(&s3, "GET", &path, &[]).status, 403);
    assert_eq!(
        s3.signature_failures()
            .iter()
            .map(|f| f.kind)
            .collect::<Vec<_>>(),
        [
            Kind::RequesterPaysMissing,
            Kind::UnsignedHeader,
            Kind::MissingAuthentication
        ]
    );
}

#[test]
fn missing_buckets_and_keys_get_s3_error_documents() {
    let (s3, _) = mock_with_object(100);
    let signer = Signer::new(s3.default_credentials(), "us-east-1");
    let r = signed(&s3, &signer, "GET", "/nobucket/k", None, &[]);
    assert_eq!((r.status, code(&r)), (404, "NoSuchBucket".to_owned()));
    assert_eq!(
        xml::text(&r.body, "Error/BucketName").as_deref(),
        Some("nobucket")
    );
    // Anonymous too, as on S3.
    let r = send(&s3, "GET", "/nobucket/k", &[]);
    assert_eq!((r.status, code(&r)), (404, "NoSuchBucket".to_owned()));
    let r = signed(
        &s3,
        &signer,
        "GET",
        &object_path("bucket", "nokey"),
        None,
        &[],
    );
    assert_eq!((r.status, code(&r)), (404, "NoSuchKey".to_owned()));
    // Removed objects, and listing, which the mock does not do.
    s3.remove("bucket", "dir/data.bin");
    let r = signed(
        &s3,
        &signer,
        "GET",
        &object_path("bucket", "dir/data.bin"),
        None,
        &[],
    );
    assert_eq!(code(&r), "NoSuchKey");
    let r = signed(&s3, &signer, "GET", "/bucket", Some("list-type=2"), &[]);
    assert_eq!((r.status, code(&r)), (501, "NotImplemented".to_owned()));
    assert!(s3.signature_failures().is_empty());
}

#[test]
fn the_payload_hash_must_be_sent_and_right() {
    let (s3, _) = mock_with_object(100);
    let path = object_path("bucket", "dir/data.bin");
    let signer = Signer::new(s3.default_credentials(), "us-east-1");
    let mut headers = signer.sign("GET", &path, None, &[]);
    remove(&mut headers, "x-amz-content-sha256");
    let r = send(&s3, "GET", &path, &headers);
    assert_eq!((r.status, code(&r)), (400, "InvalidRequest".to_owned()));
    let mut bad = signer.clone();
    bad.payload_hash = "STREAMING-NONSENSE".into();
    let r = signed(&s3, &bad, "GET", &path, None, &[]);
    assert_eq!((r.status, code(&r)), (400, "InvalidArgument".to_owned()));
    let mut other = signer.clone();
    other.payload_hash = "a".repeat(64);
    let r = signed(&s3, &other, "GET", &path, None, &[]);
    assert_eq!(
        (r.status, code(&r)),
        (400, "XAmzContentSHA256Mismatch".to_owned())
    );
    assert_eq!(
        xml::text(&r.body, "Error/S3ComputedContentSHA256").as_deref(),
        Some(EMPTY_SHA256)
    );
    assert!(
        s3.signature_failures()
            .iter()
            .all(|f| f.kind == Kind::PayloadHash)
    );
    assert_eq!(s3.signature_failures().len(), 3);
}

#[test]
fn keys_are_found_however_the_client_encodes_them_and_signed_in_one_form() {
    let s3 = S3Mock::start();
    let key = "dir/a b+c(1)~é.bin";
    s3.insert("bucket", key, pattern(0, 50));
    let canonical = object_path("bucket", key);
    assert_eq!(canonical, "/bucket/dir/a%20b%2Bc%281%29~%C3%A9.bin");
    let signer = Signer::new(s3.default_credentials(), "us-east-1");
    let others = [
        "/bucket/dir/a%20b%2bc(1)%7E%c3%a9.bin",
        "/bucket/dir%2Fa%20b%2Bc%281%29~%C3%A9.bin",
        "/bucket/dir/a%20b+c%281%29~%C3%A9.bin",
    ];
    // As S3 does, the mock decodes the path to find the key, whatever its spelling, and signs
    // that key encoded again in SigV4's one form.
    let range = [("Range", "bytes=5-9")];
    for path in std::iter::once(canonical.as_str()).chain(others) {
        let headers = signer.sign("GET", &canonical, None, &range);
        let r = send(&s3, "GET", path, &headers);
        assert_eq!(
            (r.status, r.body.as_slice()),
            (206, pattern(5, 5).as_slice()),
            "{path}"
        );
    }
    // A client that signs another spelling than that form does not match (a raw `+`, lower-
    // case hex, an encoded `~` or `/`), as on S3.
    for path in others {
        let r = signed(&s3, &signer, "GET", path, None, &range);
        assert_eq!(
            (r.status, code(&r)),
            (403, "SignatureDoesNotMatch".to_owned()),
            "{path}"
        );
    }
    assert_eq!(
        s3.url("bucket", key),
        format!("{}{canonical}", s3.endpoint())
    );
}

#[test]
fn the_fault_matrix_applies_to_signed_requests() {
    let (s3, data) = mock_with_object(100_000);
    let path = object_path("bucket", "dir/data.bin");
    s3.server().add_fault(
        FaultRule::new(Fault::Status {
            code: 503,
            retry_after: Some("1".into()),
        })
        .path(path.as_str())
        .times(1),
    );
    s3.server().add_fault(
        FaultRule::new(Fault::CutBodyAfter(1000))
            .path(path.as_str())
            .skip(1)
            .times(1),
    );
    let signer = Signer::new(s3.default_credentials(), "us-east-1");
    let first = signed(
        &s3,
        &signer,
        "GET",
        &path,
        None,
        &[("Range", "bytes=0-49999")],
    );
    assert_eq!(
        (first.status, first.header("retry-after")),
        (503, Some("1"))
    );
    let second = signed(
        &s3,
        &signer,
        "GET",
        &path,
        None,
        &[("Range", "bytes=0-49999")],
    );
    assert_eq!(
        (second.status, second.end, second.received),
        (206, BodyEnd::Eof, 1000)
    );
    let third = signed(
        &s3,
        &signer,
        "GET",
        &path,
        None,
        &[("Range", "bytes=0-49999")],
    );
    assert_eq!(
        (third.status, third.body.as_slice()),
        (206, &data[..50_000])
    );
    // A bad signature is refused before a status fault answers; the rule still counts the
    // request (rules are matched when a request arrives, before the gate).
    s3.server().add_fault(
        FaultRule::new(Fault::Status {
            code: 500,
            retry_after: None,
        })
        .times(1),
    );
    let wrong = Signer::new(MockCredentials::new("AKIDEXAMPLE", "x"), "us-east-1");
    assert_eq!(signed(&s3, &wrong, "GET", &path, None, &[]).status, 403);
    let last = s3.server().requests().pop().unwrap();
    assert_eq!(last.status, 403);
    assert!(last.fault.unwrap().contains("Status { code: 500"));
    // `If-Match` and unsatisfiable ranges behave like the HTTP mock.
    s3.set_etag("bucket", "dir/data.bin", Some("\"v1\""));
    let r = signed(&s3, &signer, "GET", &path, None, &[("If-Match", "\"v0\"")]);
    assert_eq!((r.status, code(&r)), (412, "PreconditionFailed".to_owned()));
    let r = signed(
        &s3,
        &signer,
        "GET",
        &path,
        None,
        &[("If-Match", "\"v1\""), ("Range", "bytes=0-0")],
    );
    assert_eq!(r.status, 206);
    let r = signed(
        &s3,
        &signer,
        "GET",
        &path,
        None,
        &[("Range", "bytes=100000-")],
    );
    assert_eq!(
        (r.status, r.header("content-range")),
        (416, Some("bytes */100000"))
    );
}

#[test]
fn https_and_latency_from_the_builder() {
    let s3 = S3Mock::builder()
        .tls(true)
        .latency(Duration::from_millis(50))
        .start()
        .unwrap();
    assert!(s3.endpoint().starts_with("https://127.0.0.1:"));
    s3.insert("b", "k", pattern(0, 1000));
    let signer = Signer::new(s3.default_credentials(), "us-east-1");
    let path = object_path("b", "k");
    let headers = signer.sign("GET", &path, None, &[("Range", "bytes=10-19")]);
    let ca = s3.server().ca_pem().unwrap();
    let mut client = Client::connect_tls(s3.server().addr(), &ca, "127.0.0.1").unwrap();
    let started = std::time::Instant::now();
    let r = client.request("GET", &path, &borrowed(&headers)).unwrap();
    assert!(started.elapsed() >= Duration::from_millis(50));
    assert_eq!(
        (r.status, r.body.as_slice()),
        (206, pattern(10, 10).as_slice())
    );
}
