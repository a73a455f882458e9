//! The credential cache seen from the outside: one lookup per scope (single flight over many
//! concurrent cold reads), scopes drawn by the configuration origins of credential options,
//! the refresh window, failures that are never cached, and application callbacks cached under
//! the prefix they name (only when it contains the path).

mod support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use karu::{CallbackCredential, CanonicalPath, Clock, Credential, Read, Status};
use karu_testkit::reads::{assert_failed, assert_ok, drain, read_one};
use karu_testkit::{CredentialFakes, MockCredentials, S3Mock};
use support::{
    AwsEnv, BUCKET, accepted_fakes, assert_no_rejections, build, describe, discovering, key_ids,
    locate,
};

const KIB: u64 = 1 << 10;

/// A mock with `n` objects `o0.bin`.. in each of `buckets`.
fn mock(buckets: &[&str], n: usize) -> S3Mock {
    let s3 = S3Mock::start();
    for bucket in buckets {
        for i in 0..n {
            s3.insert_virtual(bucket, &format!("o{i}.bin"), 64 * KIB);
        }
    }
    s3
}

/// One read of `o{i}.bin` in each `(bucket, i)` as one batch; checks every completion.
fn read_objects(client: &karu::Client, objects: &[(&str, usize)]) {
    let locators: Vec<_> = objects
        .iter()
        .map(|(b, i)| locate(client, b, &format!("o{i}.bin")))
        .collect();
    let batch = client.submit(locators.iter().map(|l| Read::new(l, 100, 200)));
    for c in drain(&batch) {
        assert_ok(&c, 100, 200);
    }
}

#[test]
fn sixty_four_concurrent_cold_reads_share_one_lookup() {
    let s3 = mock(&[BUCKET], 64);
    let (fakes, _) = accepted_fakes(&s3);
    // A slow endpoint, so that every credential worker is waiting on the one lookup.
    fakes.server().set_latency(Duration::from_millis(200));
    let env = AwsEnv::new().container(&fakes, &fakes.container_token());
    // Without hedging: the reads' requests are counted.
    let client = build(karu_testkit::reads::without_hedging(discovering(&s3, &env)));
    let objects: Vec<(&str, usize)> = (0..64).map(|i| (BUCKET, i)).collect();
    read_objects(&client, &objects);

    karu_testkit::reads::assert_requests(&s3.server().requests(), 64);
    assert_no_rejections(&s3);
    assert_eq!(fakes.calls().container, 1, "single flight");
    let stats = client.credential_stats();
    assert_eq!((stats.lookups, stats.hits), (1, 63), "{stats:?}");
}

#[test]
fn buckets_without_path_rules_share_one_credential() {
    let s3 = mock(&[BUCKET, "second-bucket"], 2);
    let (fakes, _) = accepted_fakes(&s3);
    let env = AwsEnv::new().container(&fakes, &fakes.container_token());
    let client = build(discovering(&s3, &env));
    read_objects(&client, &[(BUCKET, 0)]);
    read_objects(
        &client,
        &[(BUCKET, 1), ("second-bucket", 0), ("second-bucket", 1)],
    );
    assert_eq!(fakes.calls().container, 1);
    assert_eq!(client.credential_stats().lookups, 1);
    assert_no_rejections(&s3);
}

#[test]
fn a_path_rule_with_credential_options_is_its_own_scope_and_one_with_a_region_is_not() {
    let s3 = mock(&[BUCKET, "profiled-bucket", "regional-bucket"], 2);
    let default =
        MockCredentials::new("AKIDSCOPEDEFAULT0001", "scope/default/secret/0000000000000");
    let other = MockCredentials::new("AKIDSCOPEOTHER000001", "scope/other/secret/00000000000000");
    s3.add_credentials(default.clone());
    s3.add_credentials(other.clone());
    let env = AwsEnv::new();
    env.write_credentials(&format!(
        "[default]\naws_access_key_id = {}\naws_secret_access_key = {}\n\n[other]\naws_access_key_id = {}\naws_secret_access_key = {}\n",
        default.access_key_id, default.secret_access_key, other.access_key_id, other.secret_access_key
    ));
    let client = build(
        discovering(&s3, &env)
            .path_set("s3://profiled-bucket", "s3.profile", "other")
            .path_set("s3://regional-bucket", "s3.region", "us-east-1"),
    );
    for bucket in [BUCKET, "profiled-bucket", "regional-bucket"] {
        for i in 0..2 {
            assert_ok(
                &read_one(
                    &client,
                    &locate(&client, bucket, &format!("o{i}.bin")),
                    0,
                    10,
                ),
                0,
                10,
            );
        }
    }
    let log = s3.server().requests();
    assert_eq!(
        key_ids(&log),
        [
            default.access_key_id.as_str(),
            &default.access_key_id,
            &other.access_key_id,
            &other.access_key_id,
            &default.access_key_id,
            &default.access_key_id,
        ],
        "{}",
        describe(&log)
    );
    assert_no_rejections(&s3);
    let stats = client.credential_stats();
    assert_eq!((stats.lookups, stats.hits), (2, 4), "{stats:?}");
}

/// A wall clock the test moves by hand: the client judges credential expiries by it, so the
/// refresh window is reached by setting the clock, not by sleeping toward it.
#[derive(Debug)]
struct SimClock(Mutex<SystemTime>);

impl SimClock {
    fn set(&self, t: SystemTime) {
        *self.0.lock().unwrap() = t;
    }
}

impl Clock for SimClock {
    fn now(&self) -> SystemTime {
        *self.0.lock().unwrap()
    }
}

#[test]
fn a_credential_is_reused_until_the_final_second_of_its_life_then_refreshed_once() {
    let s3 = mock(&[BUCKET], 4);
    let fakes = CredentialFakes::start();
    let first = MockCredentials::new("ASIASHORTLIVED000001", "short/lived/secret/000000000000000")
        .with_session_token("short-lived-token");
    let second = MockCredentials::new("ASIAREFRESHED0000001", "refreshed/secret/0000000000000000")
        .with_session_token("refreshed-token");
    s3.add_credentials(first.clone());
    s3.add_credentials(second.clone());
    // The endpoint states expirations in whole seconds: a lifetime of 2-3 s from the client's
    // clock, so the refresh margin is its 1 s floor.
    let start = SystemTime::now();
    let now = start.duration_since(UNIX_EPOCH).unwrap();
    let expires = UNIX_EPOCH + Duration::from_secs(now.as_secs() + 3);
    fakes.issue(first.clone(), expires);
    let env = AwsEnv::new().container(&fakes, &fakes.container_token());
    let clock = Arc::new(SimClock(Mutex::new(start)));
    let client = build(discovering(&s3, &env).clock(clock.clone()));
    let object = locate(&client, BUCKET, "o0.bin");

    assert_ok(&read_one(&client, &object, 0, 10), 0, 10);
    assert_ok(&read_one(&client, &object, 10, 10), 10, 10);
    // Before the window (1.6 s before the expiry, 0.6 s before the window opens): reused.
    clock.set(expires - Duration::from_millis(1600));
    assert_ok(&read_one(&client, &object, 20, 10), 20, 10);
    assert_eq!(fakes.calls().container, 1, "reused before the window");
    // The last instant before the window: still reused.
    clock.set(expires - Duration::from_millis(1001));
    assert_ok(&read_one(&client, &object, 25, 5), 25, 5);
    assert_eq!(fakes.calls().container, 1, "reused until the window opens");

    // Inside the final second: the next read refreshes.
    fakes.issue(second.clone(), expires + Duration::from_secs(3600));
    clock.set(expires - Duration::from_millis(600));
    assert_ok(&read_one(&client, &object, 30, 10), 30, 10);
    assert_eq!(fakes.calls().container, 2, "refreshed in the window");
    assert_ok(&read_one(&client, &object, 40, 10), 40, 10);
    assert_eq!(fakes.calls().container, 2, "the refreshed value is cached");

    let log = s3.server().requests();
    assert_eq!(
        key_ids(&log),
        [
            first.access_key_id.as_str(),
            &first.access_key_id,
            &first.access_key_id,
            &first.access_key_id,
            &second.access_key_id,
            &second.access_key_id,
        ],
        "{}",
        describe(&log)
    );
    assert_no_rejections(&s3);
    let stats = client.credential_stats();
    assert_eq!((stats.lookups, stats.hits), (2, 4), "{stats:?}");
}

#[test]
fn a_failing_lookup_fails_every_read_with_credentials_and_is_never_cached() {
    let s3 = mock(&[BUCKET], 3);
    let fakes = CredentialFakes::start();
    let env = AwsEnv::new().container(&fakes, "not-the-container-token");
    let client = build(discovering(&s3, &env));
    let object = locate(&client, BUCKET, "o0.bin");

    assert_failed(&read_one(&client, &object, 0, 10), Status::Credentials);
    assert_eq!(fakes.calls().container, 1);
    assert_failed(&read_one(&client, &object, 0, 10), Status::Credentials);
    assert_eq!(fakes.calls().container, 2, "not cached: asked again");

    let locators: Vec<_> = (0..3)
        .map(|i| locate(&client, BUCKET, &format!("o{i}.bin")))
        .collect();
    let batch = client.submit(locators.iter().map(|l| Read::new(l, 0, 10)));
    for c in drain(&batch) {
        assert_failed(&c, Status::Credentials);
    }
    assert!(fakes.calls().container >= 3, "{:?}", fakes.calls());
    assert_eq!(s3.server().request_count(), 0, "nothing was sent unsigned");
    let stats = client.credential_stats();
    assert_eq!(stats.hits, 0, "{stats:?}");
    assert_eq!(stats.failures, stats.lookups, "{stats:?}");

    // Once the endpoint accepts the token, the next read succeeds: nothing negative stayed.
    let env = AwsEnv::new().container(&fakes, &fakes.container_token());
    s3.add_credentials(fakes.issued().0);
    let client = build(discovering(&s3, &env));
    let object = locate(&client, BUCKET, "o0.bin");
    assert_ok(&read_one(&client, &object, 0, 10), 0, 10);
}

#[test]
fn concurrent_reads_waiting_on_a_failing_lookup_share_its_failure() {
    let s3 = mock(&[BUCKET], 4);
    let fakes = CredentialFakes::start();
    // Slow, so that all four credential workers wait on the first lookup.
    fakes.server().set_latency(Duration::from_millis(300));
    let env = AwsEnv::new().container(&fakes, "not-the-container-token");
    let client = build(discovering(&s3, &env));
    let locators: Vec<_> = (0..4)
        .map(|i| locate(&client, BUCKET, &format!("o{i}.bin")))
        .collect();
    let batch = client.submit(locators.iter().map(|l| Read::new(l, 0, 10)));
    for c in drain(&batch) {
        assert_failed(&c, Status::Credentials);
    }
    assert_eq!(
        fakes.calls().container,
        1,
        "one lookup, its failure returned to every waiter"
    );
}

/// An S3 credential for `creds`, as an application callback builds one.
fn s3_credential(creds: &MockCredentials) -> Credential {
    karu_provider_s3::credential(
        creds.access_key_id.clone(),
        creds.secret_access_key.clone(),
        creds.session_token.clone(),
        None,
    )
}

/// A callback handing out the mock's default keys, with the prefix `prefix(path)` says,
/// counting its calls.
fn counting_callback(
    s3: &S3Mock,
    prefix: impl Fn(&str) -> Option<String> + Send + Sync + 'static,
) -> (
    impl Fn(&CanonicalPath) -> Result<CallbackCredential, karu::Error> + Send + Sync + 'static,
    Arc<AtomicU64>,
) {
    let creds = s3.default_credentials();
    let calls = Arc::new(AtomicU64::new(0));
    let counter = Arc::clone(&calls);
    let callback = move |path: &CanonicalPath| {
        counter.fetch_add(1, Ordering::SeqCst);
        let credential = s3_credential(&creds);
        Ok(match prefix(path.as_str()) {
            Some(p) => CallbackCredential::for_prefix(credential, p),
            None => CallbackCredential::once(credential),
        })
    };
    (callback, calls)
}

/// `s3://bucket` of an `s3://bucket/key` path.
fn bucket_prefix(path: &str) -> Option<String> {
    let rest = path.strip_prefix("s3://")?;
    Some(format!("s3://{}", rest.split('/').next()?))
}

#[test]
fn a_callback_with_a_bucket_prefix_is_called_once_per_bucket() {
    let s3 = mock(&[BUCKET, "second-bucket"], 8);
    let (callback, calls) = counting_callback(&s3, bucket_prefix);
    let env = AwsEnv::new();
    let client = build(discovering(&s3, &env).credential_callback("aws", callback));
    read_objects(&client, &[(BUCKET, 0)]);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let many: Vec<(&str, usize)> = (1..8).map(|i| (BUCKET, i)).collect();
    read_objects(&client, &many);
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "cached under s3://{BUCKET}"
    );
    read_objects(&client, &[("second-bucket", 0)]);
    read_objects(&client, &[("second-bucket", 1), (BUCKET, 0)]);
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "once more for the other bucket"
    );
    let stats = client.credential_stats();
    assert_eq!(
        (stats.callback_calls, stats.lookups, stats.hits),
        (2, 0, 9),
        "{stats:?}"
    );
    assert_no_rejections(&s3);
    assert!(
        key_ids(&s3.server().requests())
            .iter()
            .all(|k| k == "AKIDEXAMPLE")
    );
}

#[test]
fn a_callback_without_a_prefix_is_called_for_every_transfer() {
    let s3 = mock(&[BUCKET], 4);
    let (callback, calls) = counting_callback(&s3, |_| None);
    let env = AwsEnv::new();
    let client = build(discovering(&s3, &env).credential_callback("aws", callback));
    let objects: Vec<(&str, usize)> = (0..4).map(|i| (BUCKET, i)).collect();
    read_objects(&client, &objects);
    read_objects(&client, &objects[..2]);
    assert_eq!(s3.server().request_count(), 6);
    assert_eq!(calls.load(Ordering::SeqCst), 6, "one call per transfer");
    let stats = client.credential_stats();
    assert_eq!((stats.callback_calls, stats.hits), (6, 0), "{stats:?}");
    assert_no_rejections(&s3);
}

#[test]
fn a_callback_prefix_that_does_not_contain_the_path_is_never_cached() {
    let s3 = mock(&[BUCKET], 1);
    let (callback, calls) = counting_callback(&s3, |_| Some("s3://elsewhere".to_string()));
    let env = AwsEnv::new();
    let client = build(discovering(&s3, &env).credential_callback("aws", callback));
    let object = locate(&client, BUCKET, "o0.bin");
    for i in 0..3 {
        assert_ok(&read_one(&client, &object, i * 10, 10), i * 10, 10);
    }
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert_eq!(client.credential_stats().hits, 0);
    assert_no_rejections(&s3);
}

#[test]
fn a_callback_credential_without_an_s3_secret_fails_with_credentials_and_sends_nothing() {
    let s3 = mock(&[BUCKET], 1);
    let env = AwsEnv::new();
    let client = build(
        discovering(&s3, &env).credential_callback("aws", |_: &CanonicalPath| {
            Ok(CallbackCredential::once(Credential::new(
                "an access key of the wrong type".to_string(),
            )))
        }),
    );
    let c = read_one(&client, &locate(&client, BUCKET, "o0.bin"), 0, 10);
    assert_failed(&c, Status::Credentials);
    assert_eq!(
        s3.server().request_count(),
        0,
        "{}",
        describe(&s3.server().requests())
    );
}
