//! The AWS credential endpoint fakes answer IMDSv2, container and STS web-identity requests
//! in the documented formats (parsed here as JSON and XML), refuse what the real services
//! refuse, count every call; `credential_process` scripts run and print valid JSON; and the
//! credentials handed out sign requests the S3 mock accepts.

mod support;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use karu_testkit::aws::write_credential_process;
use karu_testkit::s3::object_path;
use karu_testkit::{
    CredentialCalls, CredentialFakes, Fault, FaultRule, MAX_REQUEST_BODY, MockCredentials, S3Mock,
    pattern,
};
use support::sigv4::{Signer, borrowed};
use support::{Client, Response, xml};

fn request(
    fakes: &CredentialFakes,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> Response {
    Client::connect(fakes.server().addr())
        .request(method, path, headers)
        .expect("a response")
}

fn post_form(fakes: &CredentialFakes, path: &str, body: &str) -> Response {
    let mut client = Client::connect(fakes.server().addr());
    client
        .send_with_body(
            "POST",
            path,
            &[("Content-Type", "application/x-www-form-urlencoded")],
            body.as_bytes(),
        )
        .unwrap();
    client.read_response(false).unwrap()
}

/// The path part of a URL the fakes hand out.
fn path_of(url: &str) -> &str {
    let rest = url.split_once("://").unwrap().1;
    &rest[rest.find('/').unwrap_or(rest.len())..]
}

fn json(r: &Response) -> serde_json::Value {
    serde_json::from_slice(&r.body)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&r.body)))
}

/// An instant with whole seconds (what RFC 3339 without fractions can carry).
fn whole_seconds(secs: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(secs)
}

fn temporary(n: u32) -> MockCredentials {
    MockCredentials::new(format!("ASIAFAKE{n:04}"), format!("secret/{n}+key"))
        .with_session_token(format!("token-{n}/+="))
}

fn imds_token(fakes: &CredentialFakes) -> String {
    let r = request(
        fakes,
        "PUT",
        "/latest/api/token",
        &[("x-aws-ec2-metadata-token-ttl-seconds", "21600")],
    );
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("x-aws-ec2-metadata-token-ttl-seconds"),
        Some("21600")
    );
    String::from_utf8(r.body).unwrap()
}

#[test]
fn imds_v2_hands_out_a_token_then_the_role_then_its_credentials() {
    let fakes = CredentialFakes::start();
    let expiration = whole_seconds(4_102_444_800); // 2100-01-01T00:00:00Z
    fakes.issue(temporary(1), expiration);
    let base = fakes.imds_endpoint();
    assert!(base.starts_with("http://127.0.0.1:") && base.ends_with('/'));

    let token = imds_token(&fakes);
    assert!(!token.is_empty());
    let list = "/latest/meta-data/iam/security-credentials/";
    // Without a token, or with a made-up one: 401.
    assert_eq!(request(&fakes, "GET", list, &[]).status, 401);
    assert_eq!(
        request(
            &fakes,
            "GET",
            list,
            &[("x-aws-ec2-metadata-token", "forged")]
        )
        .status,
        401
    );
    let auth = [("x-aws-ec2-metadata-token", token.as_str())];
    let r = request(&fakes, "GET", list, &auth);
    assert_eq!(r.status, 200);
    let role = String::from_utf8(r.body).unwrap();
    assert_eq!(role, fakes.imds_role());

    let r = request(&fakes, "GET", &format!("{list}{role}"), &auth);
    assert_eq!(
        (r.status, r.header("content-type")),
        (200, Some("application/json"))
    );
    let doc = json(&r);
    assert_eq!(doc["Code"], "Success");
    assert_eq!(doc["Type"], "AWS-HMAC");
    assert_eq!(doc["AccessKeyId"], "ASIAFAKE0001");
    assert_eq!(doc["SecretAccessKey"], "secret/1+key");
    assert_eq!(doc["Token"], "token-1/+=");
    assert_eq!(doc["Expiration"], "2100-01-01T00:00:00Z");
    let updated = doc["LastUpdated"].as_str().unwrap();
    assert!(updated.len() == 20 && updated.ends_with('Z'), "{updated}");
    assert!(doc.get("AccountId").is_none());

    // The extended API newer SDKs try first answers too, with the account id; the legacy
    // path without the trailing slash and a path joined to a trailing-slash endpoint as well.
    let r = request(
        &fakes,
        "GET",
        &format!("/latest/meta-data/iam/security-credentials-extended/{role}"),
        &auth,
    );
    assert_eq!(json(&r)["AccountId"], "123456789012");
    let r = request(
        &fakes,
        "GET",
        "/latest/meta-data/iam/security-credentials",
        &auth,
    );
    assert_eq!(r.body, role.as_bytes());
    let r = request(
        &fakes,
        "GET",
        &format!("//latest/meta-data/iam/security-credentials/{role}"),
        &auth,
    );
    assert_eq!(json(&r)["AccessKeyId"], "ASIAFAKE0001");
    // Another role does not exist.
    assert_eq!(
        request(&fakes, "GET", &format!("{list}other-role"), &auth).status,
        404
    );

    assert_eq!(
        fakes.calls(),
        CredentialCalls {
            imds_token: 1,
            imds_role_list: 4,
            imds_credentials: 4,
            container: 0,
            sts_web_identity: 0,
        }
    );
}

#[test]
fn imds_tokens_need_a_valid_ttl_and_expire() {
    let fakes = CredentialFakes::start();
    for ttl in [None, Some("0"), Some("21601"), Some("soon")] {
        let headers: Vec<(&str, &str)> = ttl
            .map(|t| vec![("x-aws-ec2-metadata-token-ttl-seconds", t)])
            .unwrap_or_default();
        assert_eq!(
            request(&fakes, "PUT", "/latest/api/token", &headers).status,
            400,
            "{ttl:?}"
        );
    }
    assert_eq!(request(&fakes, "GET", "/latest/api/token", &[]).status, 405);
    let proxied = request(
        &fakes,
        "PUT",
        "/latest/api/token",
        &[
            ("x-aws-ec2-metadata-token-ttl-seconds", "60"),
            ("X-Forwarded-For", "10.0.0.1"),
        ],
    );
    assert_eq!(proxied.status, 403);
    let r = request(
        &fakes,
        "PUT",
        "/latest/api/token",
        &[("x-aws-ec2-metadata-token-ttl-seconds", "1")],
    );
    assert_eq!(r.header("x-aws-ec2-metadata-token-ttl-seconds"), Some("1"));
    let token = String::from_utf8(r.body).unwrap();
    let list = "/latest/meta-data/iam/security-credentials/";
    assert_eq!(
        request(&fakes, "GET", list, &[("x-aws-ec2-metadata-token", &token)]).status,
        200
    );
    std::thread::sleep(Duration::from_millis(1100));
    assert_eq!(
        request(&fakes, "GET", list, &[("x-aws-ec2-metadata-token", &token)]).status,
        401
    );
    assert_eq!(fakes.calls().imds_token, 7);
}

#[test]
fn the_container_endpoint_checks_the_authorization_token() {
    let fakes = CredentialFakes::start();
    fakes.issue(temporary(2), whole_seconds(1_234_567_890));
    let uri = fakes.container_full_uri();
    assert!(
        uri.starts_with("http://127.0.0.1:") && uri.ends_with("/ecs/creds"),
        "{uri}"
    );
    let path = path_of(&uri);

    for auth in [None, Some("wrong-token")] {
        let headers: Vec<(&str, &str)> =
            auth.map(|a| vec![("Authorization", a)]).unwrap_or_default();
        let r = request(&fakes, "GET", path, &headers);
        assert_eq!(r.status, 401, "{auth:?}");
        assert_eq!(json(&r)["Code"], "AccessDenied");
    }
    let token = fakes.container_token();
    let r = request(
        &fakes,
        "GET",
        path,
        &[("Authorization", &token), ("Accept", "application/json")],
    );
    assert_eq!(r.status, 200);
    let doc = json(&r);
    assert_eq!(doc["AccessKeyId"], "ASIAFAKE0002");
    assert_eq!(doc["SecretAccessKey"], "secret/2+key");
    assert_eq!(doc["Token"], "token-2/+=");
    assert_eq!(doc["Expiration"], "2009-02-13T23:31:30Z");
    assert!(
        doc["RoleArn"]
            .as_str()
            .unwrap()
            .starts_with("arn:aws:iam::123456789012:role/")
    );
    assert!(doc.get("Code").is_none());
    assert_eq!(
        request(&fakes, "POST", path, &[("Authorization", &token)]).status,
        405
    );
    assert_eq!(fakes.calls().container, 4);
}

#[test]
fn sts_assumes_a_role_with_a_web_identity() {
    let fakes = CredentialFakes::start();
    fakes.issue(temporary(3), whole_seconds(4_102_444_800));
    let endpoint = fakes.sts_endpoint();
    assert!(endpoint.starts_with("http://127.0.0.1:") && !endpoint.ends_with('/'));
    let jwt = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJrYXJ1In0.c2ln+/=";
    let body = format!(
        "Action=AssumeRoleWithWebIdentity&Version=2011-06-15&RoleArn=arn%3Aaws%3Aiam%3A%3A123456789012%3Arole%2Freader&RoleSessionName=web-identity-token-1700000000000&WebIdentityToken={}",
        jwt.replace('+', "%2B")
            .replace('/', "%2F")
            .replace('=', "%3D")
    );
    let r = post_form(&fakes, "/", &body);
    assert_eq!(
        (r.status, r.header("content-type")),
        (200, Some("text/xml"))
    );
    let result = "AssumeRoleWithWebIdentityResponse/AssumeRoleWithWebIdentityResult";
    let field = |name: &str| xml::text(&r.body, &format!("{result}/{name}")).unwrap();
    assert_eq!(field("Credentials/AccessKeyId"), "ASIAFAKE0003");
    assert_eq!(field("Credentials/SecretAccessKey"), "secret/3+key");
    assert_eq!(field("Credentials/SessionToken"), "token-3/+=");
    assert_eq!(field("Credentials/Expiration"), "2100-01-01T00:00:00Z");
    assert_eq!(
        field("AssumedRoleUser/Arn"),
        "arn:aws:sts::123456789012:assumed-role/reader/web-identity-token-1700000000000"
    );
    assert!(
        xml::text(
            &r.body,
            "AssumeRoleWithWebIdentityResponse/ResponseMetadata/RequestId"
        )
        .is_some()
    );

    let requests = fakes.sts_requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(
        requests[0].role_arn,
        "arn:aws:iam::123456789012:role/reader"
    );
    assert_eq!(
        requests[0].role_session_name,
        "web-identity-token-1700000000000"
    );
    assert_eq!(requests[0].web_identity_token, jwt);
    assert!(!format!("{requests:?}").contains("c2ln"));

    // Errors are STS error documents.
    let missing = post_form(
        &fakes,
        "/",
        "Action=AssumeRoleWithWebIdentity&Version=2011-06-15&RoleArn=r",
    );
    assert_eq!(missing.status, 400);
    assert_eq!(
        xml::text(&missing.body, "ErrorResponse/Error/Code").as_deref(),
        Some("MissingParameter")
    );
    assert_eq!(
        xml::text(&missing.body, "ErrorResponse/Error/Type").as_deref(),
        Some("Sender")
    );
    let bad_name = post_form(
        &fakes,
        "/",
        "Action=AssumeRoleWithWebIdentity&Version=2011-06-15&RoleArn=r&RoleSessionName=has+space&WebIdentityToken=t",
    );
    assert_eq!(
        xml::text(&bad_name.body, "ErrorResponse/Error/Code").as_deref(),
        Some("ValidationError")
    );
    let other = post_form(&fakes, "/", "Action=AssumeRole&Version=2011-06-15");
    assert_eq!(
        xml::text(&other.body, "ErrorResponse/Error/Code").as_deref(),
        Some("InvalidAction")
    );
    assert_eq!(fakes.calls().sts_web_identity, 3);
    assert_eq!(fakes.sts_requests().len(), 2);
}

#[test]
fn issued_credentials_sign_requests_the_s3_mock_accepts() {
    let fakes = CredentialFakes::start();
    let (default, expiration) = fakes.issued();
    assert!(default.session_token.is_some());
    assert!(expiration > SystemTime::now() + Duration::from_secs(3600));

    let s3 = S3Mock::start();
    s3.insert("bucket", "k", pattern(0, 100));
    let creds = temporary(4);
    fakes.issue(creds.clone(), SystemTime::now() + Duration::from_secs(900));
    // What the container endpoint hands out, parsed back.
    let r = request(
        &fakes,
        "GET",
        "/ecs/creds",
        &[("Authorization", &fakes.container_token())],
    );
    let doc = json(&r);
    let handed = MockCredentials::new(
        doc["AccessKeyId"].as_str().unwrap(),
        doc["SecretAccessKey"].as_str().unwrap(),
    )
    .with_session_token(doc["Token"].as_str().unwrap());
    assert_eq!(handed, creds);
    s3.add_credentials(handed.clone());
    let signer = Signer::new(handed, "us-east-1");
    let path = object_path("bucket", "k");
    let headers = signer.sign("GET", &path, None, &[("Range", "bytes=0-9")]);
    let r = Client::connect(s3.server().addr())
        .request("GET", &path, &borrowed(&headers))
        .unwrap();
    assert_eq!(
        (r.status, r.body.as_slice()),
        (206, pattern(0, 10).as_slice())
    );
}

#[test]
fn the_fault_plan_applies_to_the_fakes() {
    let fakes = CredentialFakes::start();
    fakes.server().add_fault(
        FaultRule::new(Fault::Status {
            code: 500,
            retry_after: None,
        })
        .path("/latest/api/token")
        .times(1),
    );
    let r = request(
        &fakes,
        "PUT",
        "/latest/api/token",
        &[("x-aws-ec2-metadata-token-ttl-seconds", "60")],
    );
    assert_eq!(r.status, 500);
    let token = imds_token(&fakes);
    // A cut body: the client sees a truncated JSON document.
    let role = fakes.imds_role();
    let path = format!("/latest/meta-data/iam/security-credentials/{role}");
    fakes.server().add_fault(
        FaultRule::new(Fault::CutBodyAfter(20))
            .path(path.as_str())
            .times(1),
    );
    let r = request(
        &fakes,
        "GET",
        &path,
        &[("x-aws-ec2-metadata-token", &token)],
    );
    assert_eq!((r.status, r.received), (200, 20));
    assert!(serde_json::from_slice::<serde_json::Value>(&r.body).is_err());
    let log = fakes.server().requests();
    assert_eq!(log.len(), 3);
    assert_eq!(log[0].status, 500);
    // Unknown paths are 404, oversized bodies 413.
    assert_eq!(request(&fakes, "GET", "/nothing/here", &[]).status, 404);
    let mut client = Client::connect(fakes.server().addr());
    client
        .send_with_body("POST", "/", &[], &vec![b'a'; MAX_REQUEST_BODY + 1])
        .unwrap();
    assert_eq!(client.read_response(false).unwrap().status, 413);
}

#[test]
fn a_credential_process_script_prints_valid_json() {
    let dir = tempfile::tempdir().unwrap();
    let creds = temporary(5);
    let expiration = whole_seconds(4_102_444_800);
    let script = write_credential_process(dir.path(), &creds, Some(expiration));
    let second =
        write_credential_process(dir.path(), &MockCredentials::new("AKIDLONGTERM", "s"), None);
    assert_ne!(script, second);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&script).unwrap().permissions().mode();
        assert_eq!(mode & 0o111, 0o111, "executable");
    }
    let out = std::process::Command::new(&script).output().unwrap();
    assert!(out.status.success());
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["Version"], 1);
    assert_eq!(doc["AccessKeyId"], "ASIAFAKE0005");
    assert_eq!(doc["SecretAccessKey"], "secret/5+key");
    assert_eq!(doc["SessionToken"], "token-5/+=");
    assert_eq!(doc["Expiration"], "2100-01-01T00:00:00Z");

    let out = std::process::Command::new(&second).output().unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["AccessKeyId"], "AKIDLONGTERM");
    assert!(doc.get("SessionToken").is_none() && doc.get("Expiration").is_none());
}
