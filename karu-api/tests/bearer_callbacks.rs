//! An application callback's `BearerToken` for each family that takes one (`gcp`, `azure`,
//! `hf`), against the family's mock: every request carries `Authorization: Bearer <token>`
//! (the mock's log), cold reads under the callback's prefix share one call (single flight,
//! scoped), a path outside the prefix calls again, and the token reaches no `Debug` or error.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use karu::{
    BearerToken, CallbackCredential, CanonicalPath, Client, ClientBuilder, Credential, Read,
};
use karu_testkit::azure::{AzureMock, Identity};
use karu_testkit::gcs::GcsMock;
use karu_testkit::hf::{HfMock, RepoAccess};
use karu_testkit::pattern;

fn isolated() -> ClientBuilder {
    Client::builder()
        .user_config_file(None)
        .project_config_file(None)
        .environment(std::iter::empty::<(String, String)>())
}

/// A callback answering `token` for every path under `prefix` (valid for an hour), and the
/// count of its calls.
fn callback(
    token: &str,
    prefix: &str,
) -> (
    impl Fn(&CanonicalPath) -> Result<CallbackCredential, karu::Error> + Send + Sync + 'static,
    Arc<AtomicUsize>,
) {
    let calls = Arc::new(AtomicUsize::new(0));
    let (token, prefix, counter) = (token.to_owned(), prefix.to_owned(), calls.clone());
    let callback = move |path: &CanonicalPath| {
        counter.fetch_add(1, Ordering::SeqCst);
        let expires = SystemTime::now() + Duration::from_secs(3600);
        let credential =
            Credential::new(BearerToken::new(token.clone())).with_expiry(Some(expires));
        Ok(if path.as_str().starts_with(&prefix) {
            CallbackCredential::for_prefix(credential, prefix.clone())
        } else {
            CallbackCredential::once(credential)
        })
    };
    (callback, calls)
}

/// Two objects in one batch (both cold), then a third: each read's bytes are the pattern's.
fn read_all(client: &Client, addresses: &[&str]) {
    let objects: Vec<_> = addresses
        .iter()
        .map(|a| client.locate(a).unwrap())
        .collect();
    let batch = client.submit(
        objects
            .iter()
            .enumerate()
            .map(|(i, o)| Read::new(o, 3, 7).tag(i as u64)),
    );
    for done in batch.wait() {
        assert!(done.is_ok(), "{done:?}");
        assert_eq!(done.bytes(), &pattern(3, 7)[..]);
    }
}

#[test]
fn a_gcp_callback_s_bearer_token_authenticates_every_request() {
    let gcs = GcsMock::start();
    for (bucket, key) in [("bkt", "a.bin"), ("bkt", "b.bin"), ("other", "c.bin")] {
        gcs.insert(bucket, key, pattern(0, 100));
    }
    gcs.add_token("ya29.from-callback", "user:callback");
    let (callback, calls) = callback("ya29.from-callback", "gs://bkt");
    let client = isolated()
        .set("gcs.endpoint", gcs.endpoint())
        .credential_callback(karu::providers::gcs::FAMILY, callback)
        .build()
        .unwrap();
    read_all(&client, &["gs://bkt/a.bin", "gs://bkt/b.bin"]);
    assert_eq!(calls.load(Ordering::SeqCst), 1, "one call for the prefix");
    read_all(&client, &["gs://other/c.bin"]);
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "another bucket calls again"
    );
    let identities: Vec<String> = gcs
        .authenticated()
        .into_iter()
        .map(|a| a.identity)
        .collect();
    assert_eq!(identities, ["user:callback"; 3]);
    let requests = gcs.server().requests();
    assert_eq!(requests.len(), 3);
    for request in &requests {
        assert_eq!(
            request.header("authorization"),
            Some("Bearer ya29.from-callback")
        );
    }
    assert!(!format!("{client:?}").contains("ya29"));
}

#[test]
fn an_azure_callback_s_bearer_token_authenticates_every_request() {
    let azure = AzureMock::start();
    for (container, blob) in [("data", "a.bin"), ("data", "b.bin"), ("more", "c.bin")] {
        azure.insert(container, blob, pattern(0, 100));
    }
    let token = azure.issue_token("callback", Duration::from_secs(3600));
    let (callback, calls) = callback(&token, "az://data");
    let client = isolated()
        .set("azure.endpoint", azure.endpoint())
        .set("azure.account", azure.account())
        .credential_callback(karu::providers::azure::FAMILY, callback)
        .build()
        .unwrap();
    read_all(&client, &["az://data/a.bin", "az://data/b.bin"]);
    assert_eq!(calls.load(Ordering::SeqCst), 1, "one call for the prefix");
    read_all(&client, &["az://more/c.bin"]);
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "another container calls again"
    );
    let log = azure.take_auth_log();
    assert_eq!(log.len(), 3);
    for entry in &log {
        let expected = Identity::Bearer {
            identity: "callback".into(),
        };
        assert_eq!((&entry.identity, entry.failure), (&expected, None));
    }
    for request in azure.server().requests() {
        assert_eq!(
            request.header("authorization"),
            Some(format!("Bearer {token}").as_str())
        );
    }
}

#[test]
fn an_hf_callback_s_bearer_token_reaches_the_hub_and_never_the_cdn() {
    let hf = HfMock::start();
    hf.add_token("hf_from_callback");
    for repo in ["org/model", "org/other"] {
        hf.create_repo(repo, RepoAccess::Gated(vec!["hf_from_callback".into()]));
        for file in ["a.bin", "b.bin"] {
            hf.insert(repo, "main", file, pattern(0, 100));
        }
    }
    let (callback, calls) = callback("hf_from_callback", "hf://org/model@main");
    let client = isolated()
        .set("hf.endpoint", hf.endpoint())
        .credential_callback(karu::providers::hf::FAMILY, callback)
        .build()
        .unwrap();
    read_all(&client, &["hf://org/model/a.bin", "hf://org/model/b.bin"]);
    assert_eq!(calls.load(Ordering::SeqCst), 1, "one call for the prefix");
    read_all(&client, &["hf://org/other/a.bin"]);
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "another repository calls again"
    );
    let hub = hf.hub().take_requests();
    assert_eq!(hub.len(), 3);
    for request in &hub {
        assert_eq!(
            request.header("authorization"),
            Some("Bearer hf_from_callback")
        );
    }
    assert_eq!(hf.authorization_leaks(), 0, "the CDN never saw the token");
}

#[test]
fn a_token_no_header_can_carry_fails_its_read_without_showing_it() {
    let gcs = GcsMock::start();
    gcs.insert("bkt", "a.bin", pattern(0, 100));
    let (callback, _) = callback("SECRET\nTOKEN", "gs://bkt");
    let client = isolated()
        .set("gcs.endpoint", gcs.endpoint())
        .credential_callback("gcp", callback)
        .build()
        .unwrap();
    let object = client.locate("gs://bkt/a.bin").unwrap();
    let error = client.read(&object, 0, 10).unwrap_err();
    assert_eq!(error.status(), karu::Status::Credentials, "{error}");
    assert!(
        !format!("{error} {error:?}").contains("SECRET"),
        "{error:?}"
    );
    assert_eq!(gcs.server().request_count(), 0);
}
