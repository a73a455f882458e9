//! The Hugging Face provider against the testkit's Hub mock (the resolve endpoint and its CDN
//! on two loopback origins): the conformance suite, the reuse of redirect locations (from both
//! request logs), every token source, gated and private repositories, rate limits, revisions
//! and endpoints.

use std::time::Duration;

use karu::{CallbackCredential, CanonicalPath, Client, ClientBuilder, Status};
use karu_testkit::conformance::{self, HfHubTarget, HfMockTarget, Options};
use karu_testkit::hf::{HfMock, LinkedFault, RepoAccess};
use karu_testkit::{Fault, FaultRule, RequestRecord, pattern};

const REPO: &str = "org/model";
const FILE: &str = "weights/model.safetensors";

/// A client that reads no machine configuration, with only `env` as its environment.
fn client_with_env(hf: &HfMock, env: &[(&str, String)]) -> ClientBuilder {
    Client::builder()
        .user_config_file(None)
        .project_config_file(None)
        .environment(env.iter().map(|(k, v)| (k.to_string(), v.clone())))
        .set("hf.endpoint", hf.endpoint())
        .set("retry.initial_backoff", "10ms")
        .set("retry.max_backoff", "50ms")
}

fn isolated(hf: &HfMock) -> ClientBuilder {
    client_with_env(hf, &[])
}

/// A mock holding a 1 MiB virtual file in a public model repository.
fn public_mock() -> HfMock {
    let hf = HfMock::start();
    hf.create_repo(REPO, RepoAccess::Public);
    hf.insert_virtual(REPO, "main", FILE, 1 << 20);
    hf
}

fn address() -> String {
    format!("hf://{REPO}/{FILE}")
}

/// A request's path, status and closed range.
type Seen = (String, u16, Option<(u64, u64)>);

/// (path, status, range) of each request.
fn summary(log: &[RequestRecord]) -> Vec<Seen> {
    log.iter()
        .map(|r| (r.path.clone(), r.status, r.byte_range))
        .collect()
}

#[test]
fn the_hf_provider_conforms_on_the_hub_mock() {
    let target = HfMockTarget::start();
    let report = conformance::run(&target, &Options::default().seeds_from_env());
    println!("{report}");
    report.assert_passed();
    assert_eq!(target.mock_hf().authorization_leaks(), 0);
}

/// The fault matrix on the Hub's resolve endpoint (every read asks it): statuses, latency,
/// refused and unanswered connections, oversized error bodies. The rows about an answer's
/// bytes do not apply to a redirect and do not run.
#[test]
fn the_hf_provider_conforms_with_the_faults_on_the_hub() {
    let target = HfHubTarget::start();
    let report = conformance::run(&target, &Options::default());
    println!("{report}");
    report.assert_passed();
    let ran = |row: &str| {
        report
            .cases
            .iter()
            .any(|c| c.name.starts_with(&format!("fault/{row}/")))
    };
    for row in [
        "latency",
        "status_500",
        "status_503",
        "status_429_retry_after_seconds",
        "never_answers",
        "never_answers_then_recovers",
        "oversized_error_body_permanent",
        "connection_refused",
    ] {
        assert!(ran(row), "the Hub's matrix has no {row} row");
    }
    // Each row counts the requests the Hub saw against the transfers (status_500: exactly
    // two more), so the rows passing proves the faults reached the Hub.
    assert!(!ran("truncated_body") && !ran("wrong_content_range"));
    assert_eq!(target.mock_hf().authorization_leaks(), 0);
}

#[test]
fn a_second_read_of_a_file_goes_straight_to_the_cdn_location() {
    let hf = public_mock();
    let client = isolated(&hf).build().unwrap();
    let object = client.locate(&address()).unwrap();
    assert_eq!(
        object.canonical().as_str(),
        "hf://org/model@main/weights/model.safetensors"
    );

    assert_eq!(client.read(&object, 100, 50).unwrap(), pattern(100, 50));
    let hub = hf.hub().take_requests();
    let cdn = hf.cdn().take_requests();
    let blob = hf.cdn_path(REPO, "main", FILE);
    let resolve = hf.resolve_path(REPO, "main", FILE);
    assert_eq!(summary(&hub), [(resolve.clone(), 302, Some((100, 149)))]);
    assert_eq!(summary(&cdn), [(blob.clone(), 206, Some((100, 149)))]);
    let signed = cdn[0].query.clone();
    assert!(signed.as_deref().unwrap().contains("Signature="));

    // Later reads, a stat among them, skip the Hub and reuse the signed location.
    assert_eq!(client.read(&object, 5000, 10).unwrap(), pattern(5000, 10));
    assert_eq!(client.stat(&object).unwrap().size, Some(1 << 20));
    assert_eq!(hf.hub().take_requests().len(), 0);
    let cdn = hf.cdn().take_requests();
    assert_eq!(
        summary(&cdn),
        [
            (blob.clone(), 206, Some((5000, 5009))),
            (blob, 206, Some((0, 0)))
        ]
    );
    assert!(cdn.iter().all(|r| r.query == signed));
    assert_eq!(client.transport_stats().requests, 4);
    assert_eq!(hf.authorization_leaks(), 0);
}

/// `n` reads of 100 bytes of `object`, 16 KiB apart (each its own transfer), tagged from
/// `first`.
fn spread_reads(object: &karu::Locator, first: u64, n: u64) -> Vec<karu::Read<'static>> {
    (0..n)
        .map(|i| karu::Read::new(object, i * 16384, 100).tag(first + i))
        .collect()
}

/// 64 reads of each of two files, all queued at once on a client of `concurrency` (or the
/// default): every read exact, one resolve per file on the Hub, 64 CDN reads per file and no
/// `Authorization` at the CDN. The CDN holds each file's first request (its leader's, sent
/// after the resolve; no follower sends before its leader's answer is accepted) until the
/// other's has arrived, so both files' first reads must be in flight at once while their
/// followers wait.
fn first_reads_of_two_files_ask_the_hub_once_each(concurrency: Option<usize>) {
    const OTHER: &str = "weights/other.safetensors";
    let hf = public_mock();
    hf.insert_virtual(REPO, "main", OTHER, 1 << 20);
    hf.cdn()
        .add_fault(FaultRule::new(Fault::Barrier(2)).times(2));
    let mut builder = isolated(&hf);
    if let Some(concurrency) = concurrency {
        builder = builder.set("concurrency", concurrency);
    }
    let client = builder.build().unwrap();
    let a = client.locate(&address()).unwrap();
    let b = client.locate(&format!("hf://{REPO}/{OTHER}")).unwrap();
    // Every read of the first file is queued before any of the second's.
    let mut reads = spread_reads(&a, 0, 64);
    reads.extend(spread_reads(&b, 64, 64));
    let batch = client.submit(reads);
    let completions = batch.wait();
    assert_eq!(batch.stats().transfers, 128);
    assert_eq!(completions.len(), 128);
    for c in &completions {
        assert_eq!(c.status(), Status::Ok, "read {}", c.tag());
        assert_eq!(c.bytes(), pattern((c.tag() % 64) * 16384, 100));
    }
    // Whichever read leads its file's flight: exactly one resolve per file.
    let mut hub: Vec<(String, u16)> = hf
        .hub()
        .take_requests()
        .into_iter()
        .map(|r| (r.path, r.status))
        .collect();
    hub.sort();
    assert_eq!(
        hub,
        [
            (hf.resolve_path(REPO, "main", FILE), 302),
            (hf.resolve_path(REPO, "main", OTHER), 302),
        ],
        "exactly one resolve per file"
    );
    let cdn = hf.cdn().take_requests();
    assert_eq!(cdn.len(), 128);
    assert!(cdn.iter().all(|r| r.status == 206));
    let per_file = |file: &str| {
        let path = hf.cdn_path(REPO, "main", file);
        cdn.iter().filter(|r| r.path == path).count()
    };
    assert_eq!((per_file(FILE), per_file(OTHER)), (64, 64));
    assert_eq!(hf.authorization_leaks(), 0);
}

/// The default concurrency, fewer permits than transfers.
#[test]
fn concurrent_first_reads_of_a_file_ask_the_hub_once() {
    first_reads_of_two_files_ask_the_hub_once_each(None);
}

/// A concurrency of 4 while 126 followers wait: they wait without a permit. With permits held
/// while waiting, the first file's followers would take all four and the second file's first
/// read would never start (the barrier would then hold the leader until its deadline).
#[test]
fn waiting_followers_of_one_file_hold_no_permit_another_files_first_read_needs() {
    first_reads_of_two_files_ask_the_hub_once_each(Some(4));
}

#[test]
fn followers_of_a_first_resolve_that_never_ends_resolve_for_themselves() {
    let hf = public_mock();
    // The first resolve is never answered: its attempt ends at the low-speed time, and the
    // reads that waited for it ask the Hub themselves.
    hf.hub()
        .add_fault(FaultRule::new(Fault::NeverAnswer).times(1));
    let client = isolated(&hf)
        .set("http.low_speed_time", "1s")
        .build()
        .unwrap();
    let object = client.locate(&address()).unwrap();
    let batch = client.submit(spread_reads(&object, 0, 16));
    for c in batch.wait() {
        assert_eq!(c.status(), Status::Ok, "read {}", c.tag());
        assert_eq!(c.bytes(), pattern(c.tag() * 16384, 100));
    }
    let hub = hf.hub().take_requests();
    assert!(hub.len() >= 2, "the held resolve, then others: {hub:?}");
    assert!(hub.iter().skip(1).all(|r| r.status == 302));
    assert_eq!(hf.cdn().take_requests().len(), 16);
}

#[test]
fn a_redirect_that_contradicts_the_answer_fails_with_protocol_never_ok_bytes() {
    for fault in [
        LinkedFault::Size,
        LinkedFault::Etag,
        LinkedFault::NotANumber,
    ] {
        let hf = public_mock();
        hf.set_linked_fault(Some(fault));
        let client = isolated(&hf).build().unwrap();
        let object = client.locate(&address()).unwrap();
        let batch = client.submit([karu::Read::new(&object, 0, 10)]);
        let done = batch.wait();
        assert_eq!(done[0].status(), Status::Protocol, "{fault:?}");
        assert!(done[0].bytes().is_empty(), "{fault:?}");
        // A permanent failure: one resolve, one CDN answer, no location kept.
        assert_eq!(hf.hub().take_requests().len(), 1, "{fault:?}");
        assert_eq!(hf.cdn().take_requests().len(), 1, "{fault:?}");
        hf.set_linked_fault(None);
        assert_eq!(client.read(&object, 0, 10).unwrap(), pattern(0, 10));
        assert_eq!(
            hf.hub().take_requests().len(),
            1,
            "{fault:?}: the contradicted location was not kept"
        );
    }
    // The CDN answering with its own kind of ETag (an S3 MD5) is not a contradiction.
    let hf = public_mock();
    hf.cdn().set_etag(
        &hf.cdn_path(REPO, "main", FILE),
        Some("\"9b2cf535f27731c974343645a3985328-2\""),
    );
    let client = isolated(&hf).build().unwrap();
    let object = client.locate(&address()).unwrap();
    assert_eq!(client.read(&object, 0, 10).unwrap(), pattern(0, 10));
}

#[test]
fn a_revoked_or_expired_location_sends_the_read_back_to_the_hub_once() {
    for expire in [
        (|hf: &HfMock| hf.revoke_urls()) as fn(&HfMock),
        |hf: &HfMock| hf.set_clock_offset(2 * 3600),
    ] {
        let hf = public_mock();
        let client = isolated(&hf).build().unwrap();
        let object = client.locate(&address()).unwrap();
        client.read(&object, 0, 10).unwrap();
        hf.hub().take_requests();
        hf.cdn().take_requests();
        expire(&hf);

        // The kept location answers 403: one trip back to the Hub, then the new location.
        assert_eq!(client.read(&object, 10, 10).unwrap(), pattern(10, 10));
        let blob = hf.cdn_path(REPO, "main", FILE);
        let cdn = hf.cdn().take_requests();
        assert_eq!(
            summary(&cdn),
            [
                (blob.clone(), 403, Some((10, 19))),
                (blob.clone(), 206, Some((10, 19)))
            ]
        );
        assert_ne!(cdn[0].query, cdn[1].query, "a new signed location");
        assert_eq!(hf.hub().take_requests().len(), 1);
        // The new location is kept in turn.
        client.read(&object, 20, 10).unwrap();
        assert_eq!(hf.hub().take_requests().len(), 0);
        assert_eq!(hf.cdn().take_requests().len(), 1);
    }
}

#[test]
fn a_location_that_keeps_failing_is_retried_at_the_hub_only_once() {
    let hf = public_mock();
    let client = isolated(&hf).build().unwrap();
    let object = client.locate(&address()).unwrap();
    client.read(&object, 0, 10).unwrap();
    hf.hub().take_requests();
    hf.cdn().take_requests();
    let blob = hf.cdn_path(REPO, "main", FILE);
    hf.cdn().add_fault(
        FaultRule::new(Fault::Status {
            code: 403,
            retry_after: None,
        })
        .path(&blob),
    );
    let error = client.read(&object, 0, 10).unwrap_err();
    assert_eq!(error.status(), Status::PermissionDenied, "{error}");
    assert_eq!(hf.hub().take_requests().len(), 1);
    assert_eq!(
        summary(&hf.cdn().take_requests()),
        [(blob.clone(), 403, Some((0, 9))), (blob, 403, Some((0, 9)))]
    );
}

#[test]
fn locations_too_short_lived_or_turned_off_are_not_reused() {
    let hf = public_mock();
    // A 1 s signature lives no longer than its reuse margin.
    hf.set_url_lifetime(Duration::from_secs(1));
    let client = isolated(&hf).build().unwrap();
    let object = client.locate(&address()).unwrap();
    for i in 0..3 {
        client.read(&object, i * 10, 10).unwrap();
    }
    assert_eq!(hf.hub().take_requests().len(), 3);
    assert_eq!(hf.cdn().take_requests().len(), 3);

    hf.set_url_lifetime(Duration::from_secs(3600));
    let client = isolated(&hf)
        .set("hf.reuse_locations", false)
        .build()
        .unwrap();
    let object = client.locate(&address()).unwrap();
    for i in 0..3 {
        client.read(&object, i * 10, 10).unwrap();
    }
    assert_eq!(hf.hub().take_requests().len(), 3);
    assert_eq!(hf.cdn().take_requests().len(), 3);
}

/// The token each request to the Hub carried.
fn hub_tokens(hf: &HfMock) -> Vec<Option<String>> {
    hf.hub()
        .take_requests()
        .iter()
        .map(|r| r.header("authorization").map(str::to_string))
        .collect()
}

/// A gated repository readable with `token` only, holding FILE.
fn gated_mock(token: &str) -> HfMock {
    let hf = HfMock::start();
    hf.add_token(token);
    hf.add_token("hf_other");
    hf.create_repo(REPO, RepoAccess::Gated(vec![token.to_string()]));
    hf.insert(REPO, "main", FILE, pattern(0, 100));
    hf
}

fn read_ok(client: &Client) {
    let object = client.locate(&address()).unwrap();
    assert_eq!(client.read(&object, 0, 10).unwrap(), pattern(0, 10));
}

#[test]
fn every_token_source_reaches_the_hub_and_never_the_cdn() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let hf_home = dir.path().join("hf-home");
    let cache = home.join(".cache/huggingface");
    for d in [&hf_home, &cache] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(dir.path().join("token-path"), "hf_path\n").unwrap();
    std::fs::write(hf_home.join("token"), "hf_home").unwrap();
    std::fs::write(cache.join("token"), "hf_cache\n").unwrap();
    let s = |p: &std::path::Path| p.to_str().unwrap().to_string();
    let home_var = ("HOME", s(&home));
    let cases: Vec<(&str, Vec<(&str, String)>)> = vec![
        (
            "hf_env",
            vec![("HF_TOKEN", "hf_env".into()), home_var.clone()],
        ),
        (
            "hf_legacy",
            vec![
                ("HUGGING_FACE_HUB_TOKEN", "hf_legacy".into()),
                home_var.clone(),
            ],
        ),
        (
            "hf_path",
            vec![
                ("HF_TOKEN_PATH", s(&dir.path().join("token-path"))),
                ("HF_HOME", s(&hf_home)),
                home_var.clone(),
            ],
        ),
        ("hf_home", vec![("HF_HOME", s(&hf_home)), home_var.clone()]),
        ("hf_cache", vec![home_var.clone()]),
    ];
    for (token, env) in cases {
        let hf = gated_mock(token);
        read_ok(&client_with_env(&hf, &env).build().unwrap());
        assert_eq!(
            hub_tokens(&hf),
            [Some(format!("Bearer {token}"))],
            "{env:?}"
        );
        assert_eq!(hf.authorization_leaks(), 0);
    }

    // The configuration beats the environment and the file.
    let hf = gated_mock("hf_config");
    let env = [("HF_TOKEN", "hf_env".to_string()), home_var.clone()];
    let client = client_with_env(&hf, &env)
        .set("hf.token", "hf_config")
        .build()
        .unwrap();
    read_ok(&client);
    assert_eq!(hub_tokens(&hf), [Some("Bearer hf_config".to_string())]);

    // An application's callback beats the configuration.
    let hf = gated_mock("hf_callback");
    let client = client_with_env(&hf, &env)
        .set("hf.token", "hf_config")
        .credential_callback(karu_provider_hf::FAMILY, |_: &CanonicalPath| {
            Ok(CallbackCredential::once(karu_provider_hf::credential(
                "hf_callback",
            )))
        })
        .build()
        .unwrap();
    read_ok(&client);
    assert_eq!(hub_tokens(&hf), [Some("Bearer hf_callback".to_string())]);

    // None anywhere: anonymous, and a public repository reads fine.
    let hf = public_mock();
    let nothing = ("HOME", s(&dir.path().join("empty-home")));
    let client = client_with_env(&hf, &[nothing]).build().unwrap();
    let object = client.locate(&address()).unwrap();
    assert_eq!(client.read(&object, 0, 10).unwrap(), pattern(0, 10));
    assert_eq!(hub_tokens(&hf), [None]);
}

#[test]
fn gated_and_private_repositories_without_a_token_are_permission_denied() {
    let hf = gated_mock("hf_granted");
    hf.create_repo(
        "org/private",
        RepoAccess::Private(vec!["hf_granted".into()]),
    );
    hf.insert("org/private", "main", FILE, pattern(0, 100));
    let anonymous = isolated(&hf).build().unwrap();
    for repo in [REPO, "org/private"] {
        let object = anonymous.locate(&format!("hf://{repo}/{FILE}")).unwrap();
        let error = anonymous.read(&object, 0, 10).unwrap_err();
        assert_eq!(error.status(), Status::PermissionDenied, "{error}");
        assert_eq!(error.http_status(), Some(401));
        assert!(error.message().contains("token is needed"), "{error}");
    }
    // A token without access to the gated repository: 403, and what to do about it.
    let other = isolated(&hf).set("hf.token", "hf_other").build().unwrap();
    let object = other.locate(&address()).unwrap();
    let error = other.read(&object, 0, 10).unwrap_err();
    assert_eq!(error.status(), Status::PermissionDenied, "{error}");
    assert!(error.message().contains("request access"), "{error}");
    assert!(!error.message().contains("hf_other"), "{error}");
    // Nothing reached the CDN.
    assert_eq!(hf.cdn().request_count(), 0);
}

#[test]
fn rate_limits_and_hub_faults_go_through_the_retry_policy() {
    let hf = public_mock();
    hf.rate_limit(2);
    let client = isolated(&hf).build().unwrap();
    let object = client.locate(&address()).unwrap();
    assert_eq!(client.read(&object, 0, 10).unwrap(), pattern(0, 10));
    let statuses: Vec<u16> = hf.hub().take_requests().iter().map(|r| r.status).collect();
    assert_eq!(statuses, [429, 429, 302]);
    assert_eq!(hf.cdn().take_requests().len(), 1);

    let hf = public_mock();
    hf.hub().add_fault(
        FaultRule::new(Fault::Status {
            code: 503,
            retry_after: None,
        })
        .times(1),
    );
    let client = isolated(&hf).build().unwrap();
    let object = client.locate(&address()).unwrap();
    assert_eq!(client.read(&object, 0, 10).unwrap(), pattern(0, 10));
    let statuses: Vec<u16> = hf.hub().take_requests().iter().map(|r| r.status).collect();
    assert_eq!(statuses, [503, 302]);
}

#[test]
fn revisions_pasted_urls_and_endpoints() {
    let hf = HfMock::start();
    hf.insert(
        "datasets/org/data",
        "refs/convert/parquet",
        "default/0.parquet",
        pattern(0, 64),
    );
    hf.insert(
        "datasets/org/data",
        "main",
        "default/0.parquet",
        pattern(1, 64),
    );
    let client = isolated(&hf).build().unwrap();
    let pr = client
        .locate("hf://datasets/org/data@refs/convert/parquet/default/0.parquet")
        .unwrap();
    assert_eq!(client.read(&pr, 0, 8).unwrap(), pattern(0, 8));
    assert_eq!(
        hf.hub().take_requests()[0].path,
        "/datasets/org/data/resolve/refs%2Fconvert%2Fparquet/default/0.parquet"
    );
    // A pasted resolve URL is the same file, read from the configured endpoint.
    let pasted = client
        .locate(
            "https://huggingface.co/datasets/org/data/resolve/main/default/0.parquet?download=true",
        )
        .unwrap();
    assert_eq!(
        pasted.canonical().as_str(),
        "hf://datasets/org/data@main/default/0.parquet"
    );
    assert_eq!(client.read(&pasted, 0, 8).unwrap(), pattern(1, 8));
    // A missing revision or file is NotFound.
    let missing = client
        .locate("hf://datasets/org/data@v9/default/0.parquet")
        .unwrap();
    assert_eq!(
        client.read(&missing, 0, 8).unwrap_err().status(),
        Status::NotFound
    );

    // HF_ENDPOINT, as the Hub's clients read it, when hf.endpoint is not set.
    let client = Client::builder()
        .user_config_file(None)
        .project_config_file(None)
        .environment([("HF_ENDPOINT", hf.endpoint())])
        .build()
        .unwrap();
    let object = client
        .locate("hf://datasets/org/data/default/0.parquet")
        .unwrap();
    assert_eq!(client.read(&object, 0, 8).unwrap(), pattern(1, 8));
}
