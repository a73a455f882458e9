//! Every credential source of the S3 provider against loopback fakes: explicit keys, the
//! environment, profiles, `credential_process` (from a profile and from the configuration),
//! STS web identity, container credentials, instance metadata (IMDSv2), the order between
//! them, and discovery turned off. Each test proves three things: the bytes arrived, which
//! access key signed them (from the S3 mock's log), and how often each source was asked.

mod support;

use std::time::{Duration, Instant};

use karu::Status;
use karu_testkit::reads::{assert_failed, assert_ok, read_all, read_one};
use karu_testkit::{
    CredentialCalls, CredentialFakes, Fault, FaultRule, MockCredentials, S3Mock, pattern,
};
use support::{
    AwsEnv, BUCKET, accepted_fakes, assert_no_rejections, build, counting_process, describe,
    discovering, explicit, key_ids, locate, runs,
};

const MIB: u64 = 1 << 20;

/// Three reads of one object (two of them merged), checked; returns the key ids that signed.
fn read_three(s3: &S3Mock, client: &karu::Client) -> Vec<String> {
    let object = locate(client, BUCKET, "a.bin");
    let reads = [(0, 100), (150, 100), (MIB / 2, 4096)];
    let done = read_all(client, &object, &reads);
    for (c, &(o, l)) in done.iter().zip(&reads) {
        assert_ok(c, o, l);
    }
    let log = s3.server().requests();
    assert_no_rejections(s3);
    let ids = key_ids(&log);
    assert!(!ids.is_empty(), "{}", describe(&log));
    ids
}

fn mock() -> S3Mock {
    let s3 = S3Mock::start();
    s3.insert_virtual(BUCKET, "a.bin", MIB);
    s3
}

/// Assert that every request was signed with `key_id`.
#[track_caller]
fn assert_signed_by(ids: &[String], key_id: &str) {
    assert!(
        ids.iter().all(|id| id == key_id),
        "signed by {ids:?}, expected {key_id}"
    );
}

fn env_keys() -> MockCredentials {
    MockCredentials::new(
        "AKIDFROMENVIRONMENT1",
        "environment/secret/key/00000000000000000",
    )
    .with_session_token("environment-session-token")
}

#[test]
fn explicit_keys_in_the_configuration_beat_keys_in_the_environment() {
    let s3 = mock();
    let from_env = env_keys();
    s3.add_credentials(from_env.clone());
    let env = AwsEnv::new().keys(&from_env);
    let client = build(explicit(&s3, &env));
    assert_signed_by(&read_three(&s3, &client), "AKIDEXAMPLE");
    let log = s3.server().requests();
    assert!(
        log.iter()
            .all(|r| r.header("x-amz-security-token").is_none())
    );
    assert_eq!(client.credential_stats().lookups, 1);
}

#[test]
fn keys_in_the_environment_are_discovered_with_their_session_token() {
    let s3 = mock();
    let from_env = env_keys();
    s3.add_credentials(from_env.clone());
    let env = AwsEnv::new().keys(&from_env);
    let client = build(discovering(&s3, &env));
    assert_signed_by(&read_three(&s3, &client), &from_env.access_key_id);
    let log = s3.server().requests();
    for r in &log {
        assert_eq!(
            r.header("x-amz-security-token"),
            Some("environment-session-token")
        );
        let signed = support::signed(r).unwrap();
        assert!(signed.headers.iter().any(|h| h == "x-amz-security-token"));
    }
    assert_eq!(client.credential_stats().lookups, 1);
}

#[test]
fn profiles_come_from_the_files_chosen_by_aws_profile_or_s3_profile() {
    let s3 = mock();
    let keys = |n: &str| {
        MockCredentials::new(
            format!("AKIDPROFILE{n:0>9}"),
            format!("profile/{n}/secret/0000000000000000000"),
        )
    };
    for n in ["default", "p", "q"] {
        s3.add_credentials(keys(n));
    }
    let env = AwsEnv::new().set("AWS_PROFILE", "p");
    let mut credentials = String::new();
    for n in ["default", "p", "q"] {
        let k = keys(n);
        credentials.push_str(&format!(
            "[{n}]\naws_access_key_id = {}\naws_secret_access_key = {}\n\n",
            k.access_key_id, k.secret_access_key
        ));
    }
    env.write_credentials(&credentials);
    env.write_config("[default]\nregion = us-east-1\n\n[profile p]\nregion = us-east-1\n");

    let by_env = build(discovering(&s3, &env));
    assert_signed_by(&read_three(&s3, &by_env), &keys("p").access_key_id);
    assert_eq!(by_env.credential_stats().lookups, 1);

    s3.server().take_requests();
    let by_config = build(discovering(&s3, &env).set("s3.profile", "q"));
    assert_signed_by(&read_three(&s3, &by_config), &keys("q").access_key_id);
    assert_eq!(by_config.credential_stats().lookups, 1);
}

#[test]
fn a_profiles_credential_process_runs_once_for_many_reads() {
    let s3 = mock();
    let creds = MockCredentials::new(
        "AKIDPROFILEPROCESS01",
        "profile/process/secret/000000000000",
    );
    s3.add_credentials(creds.clone());
    let env = AwsEnv::new().set("AWS_PROFILE", "proc");
    let (command, counter) = counting_process(env.home(), &creds);
    env.write_config(&format!("[profile proc]\ncredential_process = {command}\n"));
    let client = build(discovering(&s3, &env));
    assert_signed_by(&read_three(&s3, &client), &creds.access_key_id);
    let object = locate(&client, BUCKET, "a.bin");
    assert_ok(&read_one(&client, &object, 7, 7), 7, 7);
    assert_eq!(runs(&counter), 1, "the process ran once");
    assert_eq!(client.credential_stats().lookups, 1);
}

#[test]
fn s3_credential_process_runs_once_for_many_reads() {
    let s3 = mock();
    let creds = MockCredentials::new(
        "ASIACONFIGPROCESS001",
        "config/process/secret/0000000000000",
    )
    .with_session_token("config-process-token");
    s3.add_credentials(creds.clone());
    let env = AwsEnv::new();
    let (command, counter) = counting_process(env.home(), &creds);
    let client = build(discovering(&s3, &env).set("s3.credential_process", command));
    assert_signed_by(&read_three(&s3, &client), &creds.access_key_id);
    let log = s3.server().requests();
    assert!(
        log.iter()
            .all(|r| r.header("x-amz-security-token") == Some("config-process-token"))
    );
    assert_eq!(runs(&counter), 1, "the process ran once");
    assert_eq!(client.credential_stats().lookups, 1);
}

/// A mock, the credential fakes serving it and a client discovering its credentials in the
/// environment made for them, after three reads it signed with the key the fakes issued.
struct Discovered {
    s3: S3Mock,
    fakes: CredentialFakes,
    issued: MockCredentials,
    client: karu::Client,
    /// Kept for the client's later lookups (it owns the files it names).
    _env: AwsEnv,
}

/// [`Discovered`], in the environment `env` sets up for the fakes.
fn discovered(env: fn(&CredentialFakes) -> AwsEnv) -> Discovered {
    discovered_with(env, |_| {})
}

/// [`discovered`], after `faults` has set the fakes' fault plan.
fn discovered_with(
    env: fn(&CredentialFakes) -> AwsEnv,
    faults: impl FnOnce(&CredentialFakes),
) -> Discovered {
    let s3 = mock();
    let (fakes, issued) = accepted_fakes(&s3);
    faults(&fakes);
    let env = env(&fakes);
    let client = build(discovering(&s3, &env));
    assert_signed_by(&read_three(&s3, &client), &issued.access_key_id);
    Discovered {
        s3,
        fakes,
        issued,
        client,
        _env: env,
    }
}

const ROLE_ARN: &str = "arn:aws:iam::123456789012:role/karu-web-identity";
const WEB_TOKEN: &str = "eyJhbGciOiJSUzI1NiJ9.karu-test-web-identity-token.c2lnbmF0dXJl";

fn web_identity_env(fakes: &CredentialFakes) -> AwsEnv {
    let env = AwsEnv::new();
    let token_file = env.write_file("web-identity-token", WEB_TOKEN);
    env.set(
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        token_file.to_str().unwrap().to_string(),
    )
    .set("AWS_ROLE_ARN", ROLE_ARN)
    .set("AWS_ROLE_SESSION_NAME", "karu-test-session")
    .set("AWS_ENDPOINT_URL_STS", fakes.sts_endpoint())
}

#[test]
fn web_identity_assumes_the_role_at_sts_with_the_token_files_contents() {
    let d = discovered(web_identity_env);
    let requests = d.fakes.sts_requests();
    assert_eq!(requests.len(), 1, "{requests:?}");
    assert_eq!(requests[0].web_identity_token, WEB_TOKEN);
    assert_eq!(requests[0].role_arn, ROLE_ARN);
    assert_eq!(requests[0].role_session_name, "karu-test-session");
    assert_eq!(
        d.fakes.calls(),
        CredentialCalls {
            sts_web_identity: 1,
            ..CredentialCalls::default()
        }
    );
    assert_eq!(d.client.credential_stats().lookups, 1);
}

fn container_env(fakes: &CredentialFakes) -> AwsEnv {
    AwsEnv::new().container(fakes, &fakes.container_token())
}

#[test]
fn container_credentials_come_from_the_full_uri_with_the_authorization_token() {
    let d = discovered(container_env);
    let log = d.s3.server().requests();
    assert!(
        log.iter()
            .all(|r| r.header("x-amz-security-token") == d.issued.session_token.as_deref())
    );
    assert_eq!(
        d.fakes.calls(),
        CredentialCalls {
            container: 1,
            ..CredentialCalls::default()
        }
    );
    let sent = d.fakes.server().requests();
    assert_eq!(sent.len(), 1);
    assert_eq!(
        sent[0].header("authorization"),
        Some(d.fakes.container_token().as_str())
    );
    assert_eq!(d.client.credential_stats().lookups, 1);
}

#[test]
fn a_hung_lookup_ends_at_the_reads_deadline_and_the_next_read_looks_up_again() {
    let s3 = mock();
    let (fakes, issued) = accepted_fakes(&s3);
    let env = container_env(&fakes);
    // The container endpoint never answers its first request (aws-config itself would wait
    // for it for seconds); later requests are answered.
    let uri = fakes.container_full_uri();
    let path = &uri[uri.find("://").map(|i| i + 3).unwrap_or(0)..];
    let path = &path[path.find('/').unwrap_or(0)..];
    fakes
        .server()
        .add_fault(FaultRule::new(Fault::NeverAnswer).path(path).times(1));
    let client = build(discovering(&s3, &env).set("retry.deadline", "1s"));
    let object = locate(&client, BUCKET, "a.bin");
    let first = client.read(&object, 0, 10).unwrap_err();
    assert_eq!(first.status(), Status::TimedOut, "{first}");
    // The lookup was bounded by that read's deadline: it ends (as a failure), the credential
    // worker is free and the scope is cold again, so the next read asks the endpoint again.
    let give_up = Instant::now() + Duration::from_secs(30);
    while client.credential_stats().failures < 1 {
        assert!(Instant::now() < give_up, "the hung lookup never ended");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(client.read(&object, 100, 10).unwrap(), pattern(100, 10));
    // Two requests reached the endpoint: the hung one, and the one that answered.
    let asked: Vec<_> = fakes
        .server()
        .requests()
        .into_iter()
        .map(|r| r.path)
        .collect();
    assert_eq!(asked, [path, path]);
    assert_eq!(fakes.calls().container, 1, "one answered");
    assert_signed_by(&key_ids(&s3.server().requests()), &issued.access_key_id);
    let stats = client.credential_stats();
    assert_eq!((stats.lookups, stats.failures), (2, 1));
}

fn imds_env(fakes: &CredentialFakes) -> AwsEnv {
    AwsEnv::new()
        .unset("AWS_EC2_METADATA_DISABLED")
        .set("AWS_EC2_METADATA_SERVICE_ENDPOINT", fakes.imds_endpoint())
}

#[test]
fn instance_metadata_takes_a_token_then_the_role_then_its_credentials() {
    let d = discovered(imds_env);
    let calls = d.fakes.calls();
    assert_eq!(
        (
            calls.imds_token,
            calls.imds_role_list,
            calls.imds_credentials
        ),
        (1, 1, 1),
        "{calls:?}"
    );
    assert_eq!((calls.container, calls.sts_web_identity), (0, 0));
    // IMDSv2: the token first, then the role list and the role's credentials, both with it.
    let log = d.fakes.server().requests();
    let paths: Vec<&str> = log.iter().map(|r| r.path.as_str()).collect();
    assert_eq!(paths.len(), 3, "{paths:?}");
    assert_eq!(
        (log[0].method.as_str(), paths[0]),
        ("PUT", "/latest/api/token")
    );
    assert!(
        paths[1].ends_with('/') && paths[2].ends_with("/karu-test-role"),
        "{paths:?}"
    );
    assert!(
        log[1..]
            .iter()
            .all(|r| r.header("x-aws-ec2-metadata-token").is_some())
    );
    assert_eq!(d.client.credential_stats().lookups, 1);
}

/// A discovery whose credential endpoint fails for a moment: `paths` names the path answered
/// by a throttle and then a server error, and the path whose first answer is cut by a
/// connection reset.
fn discovered_through_failures(
    env: fn(&CredentialFakes) -> AwsEnv,
    paths: fn(&CredentialFakes) -> (String, String),
) -> Discovered {
    discovered_with(env, |fakes| {
        let (path, reset_path) = paths(fakes);
        // Rules count their matching requests separately: each fault takes the next request
        // of its path that the earlier ones let through.
        let reset_first = u64::from(reset_path == path);
        let server = fakes.server();
        server.add_fault(
            FaultRule::new(Fault::ResetAfter(0))
                .path(&reset_path)
                .times(1),
        );
        server.add_fault(
            FaultRule::new(Fault::Status {
                code: 429,
                retry_after: Some("0".into()),
            })
            .path(&path)
            .skip(reset_first)
            .times(1),
        );
        server.add_fault(
            FaultRule::new(Fault::Status {
                code: 503,
                retry_after: None,
            })
            .path(&path)
            .skip(reset_first + 1)
            .times(1),
        );
    })
}

/// Each request the fakes received: its method, its path and the status it was answered with.
fn exchanges(fakes: &CredentialFakes) -> Vec<(String, String, u16)> {
    fakes
        .server()
        .requests()
        .into_iter()
        .map(|r| (r.method.clone(), r.path.clone(), r.status))
        .collect()
}

fn role_path(fakes: &CredentialFakes) -> String {
    format!(
        "/latest/meta-data/iam/security-credentials/{}",
        fakes.imds_role()
    )
}

#[test]
fn instance_metadata_is_asked_again_after_a_reset_a_throttle_and_a_server_error() {
    let d = discovered_through_failures(imds_env, |fakes| {
        (role_path(fakes), "/latest/api/token".into())
    });
    let role = role_path(&d.fakes);
    let sent = exchanges(&d.fakes);
    let asked: Vec<(&str, &str)> = sent
        .iter()
        .map(|(m, p, _)| (m.as_str(), p.as_str()))
        .collect();
    // The token twice (the first reset), the role list once, the role's credentials three
    // times (429, 503, then the answer): the lookup never failed.
    assert_eq!(
        asked,
        [
            ("PUT", "/latest/api/token"),
            ("PUT", "/latest/api/token"),
            ("GET", "/latest/meta-data/iam/security-credentials/"),
            ("GET", role.as_str()),
            ("GET", role.as_str()),
            ("GET", role.as_str()),
        ],
        "{sent:?}"
    );
    let statuses: Vec<u16> = sent.iter().map(|(_, _, s)| *s).collect();
    assert_eq!(statuses[3..], [429, 503, 200], "{sent:?}");
    let stats = d.client.credential_stats();
    assert_eq!((stats.lookups, stats.failures), (1, 0));
}

#[test]
fn container_credentials_are_asked_again_after_a_throttle_a_server_error_and_a_reset() {
    let d = discovered_through_failures(container_env, |_| {
        ("/ecs/creds".into(), "/ecs/creds".into())
    });
    let sent = exchanges(&d.fakes);
    assert_eq!(sent.len(), 4, "{sent:?}");
    assert!(sent.iter().all(|(m, p, _)| m == "GET" && p == "/ecs/creds"));
    // The fakes answered two of them with credentials: the one cut by the reset, and the last.
    let statuses: Vec<u16> = sent.iter().map(|(_, _, s)| *s).collect();
    assert_eq!(statuses, [200, 429, 503, 200], "{sent:?}");
    assert_eq!(d.fakes.calls().container, 2);
    let stats = d.client.credential_stats();
    assert_eq!((stats.lookups, stats.failures), (1, 0));
}

#[test]
fn discovery_follows_the_documented_order() {
    let s3 = mock();
    let (fakes, issued) = accepted_fakes(&s3);
    let profile = MockCredentials::new(
        "AKIDORDERPROFILE0001",
        "order/profile/secret/00000000000000",
    );
    s3.add_credentials(profile.clone());
    // Every source at once: web identity, container and instance metadata point at the fakes.
    let everything = || {
        web_identity_env(&fakes)
            .unset("AWS_EC2_METADATA_DISABLED")
            .set("AWS_EC2_METADATA_SERVICE_ENDPOINT", fakes.imds_endpoint())
            .container(&fakes, &fakes.container_token())
    };

    // A profile with keys comes before all of them: no fake is asked.
    let env = everything().set("AWS_PROFILE", "ordered");
    env.write_credentials(&format!(
        "[ordered]\naws_access_key_id = {}\naws_secret_access_key = {}\n",
        profile.access_key_id, profile.secret_access_key
    ));
    let client = build(discovering(&s3, &env));
    assert_signed_by(&read_three(&s3, &client), &profile.access_key_id);
    assert_eq!(fakes.calls(), CredentialCalls::default());

    // Then web identity.
    s3.server().take_requests();
    let env = everything();
    let client = build(discovering(&s3, &env));
    assert_signed_by(&read_three(&s3, &client), &issued.access_key_id);
    let calls = fakes.calls();
    assert_eq!(
        (calls.sts_web_identity, calls.container, calls.imds_token),
        (1, 0, 0),
        "{calls:?}"
    );

    // Then the container endpoint.
    s3.server().take_requests();
    let env = everything()
        .unset("AWS_WEB_IDENTITY_TOKEN_FILE")
        .unset("AWS_ROLE_ARN");
    let client = build(discovering(&s3, &env));
    assert_signed_by(&read_three(&s3, &client), &issued.access_key_id);
    let calls = fakes.calls();
    assert_eq!(
        (calls.sts_web_identity, calls.container, calls.imds_token),
        (1, 1, 0),
        "{calls:?}"
    );
}

#[test]
fn without_discovery_and_without_keys_every_read_fails_with_credentials_and_nothing_is_asked() {
    let s3 = mock();
    let (fakes, _) = accepted_fakes(&s3);
    let from_env = env_keys();
    s3.add_credentials(from_env.clone());
    // Sources that discovery would find, all ignored.
    let env = container_env(&fakes)
        .unset("AWS_EC2_METADATA_DISABLED")
        .set("AWS_EC2_METADATA_SERVICE_ENDPOINT", fakes.imds_endpoint())
        .keys(&from_env);
    let client = build(discovering(&s3, &env).set("s3.discovery", false));
    let object = locate(&client, BUCKET, "a.bin");
    let done = read_all(&client, &object, &[(0, 10), (MIB / 2, 10)]);
    for c in &done {
        assert_failed(c, Status::Credentials);
    }
    assert_eq!(s3.server().request_count(), 0, "nothing reached S3");
    assert_eq!(fakes.server().request_count(), 0, "nothing reached a fake");
    assert_eq!(fakes.calls(), CredentialCalls::default());
    let stats = client.credential_stats();
    assert_eq!(stats.hits, 0, "a failure is not cached: {stats:?}");
    assert!(stats.failures >= 1, "{stats:?}");
}
