//! The toy provider against the testkit's HTTP mock: the whole conformance suite (the fault
//! matrix included) through `toy://` addresses, with a mock that refuses requests without the
//! configured bearer token; and what registration, the configuration section and the
//! credential family add.

use std::sync::Arc;

use karu::{CallbackCredential, CanonicalPath, Client, ClientBuilder, Status};
use karu_testkit::conformance::{self, MockTarget, Options, Target};
use karu_testkit::{Gate, GateResponse, MockServer, RequestHead, pattern};

const TOKEN: &str = "t0ken-for-the-toy";

/// A builder that reads no machine configuration or environment, with the toy provider.
fn isolated() -> ClientBuilder {
    conformance::isolated_builder().provider(karu_provider_example::register)
}

/// Answers 401 unless the request carries `Authorization: Bearer TOKEN`.
#[derive(Debug)]
struct NeedsToken;

impl Gate for NeedsToken {
    fn check(&self, request: &RequestHead) -> Option<GateResponse> {
        let expected = format!("Bearer {TOKEN}");
        match request.header("authorization") {
            Some(value) if value == expected => None,
            _ => Some(GateResponse::new(
                401,
                r#"{"message": "a token is required"}"#,
            )),
        }
    }
}

/// The toy provider on the HTTP mock: the testkit's generic mock target, configured with the
/// toy's scheme, registration and token, and a server that refuses requests without it.
fn toy_target() -> MockTarget {
    let server = MockServer::start();
    server.set_gate(Some(Arc::new(NeedsToken)));
    MockTarget::new("toy-on-http-mock", server)
        .with_builder(|| isolated().set("toy.token", TOKEN))
        .with_address(|authority, name| format!("toy://{authority}/{name}"))
}

#[test]
fn the_toy_provider_conforms_on_the_http_mock() {
    let target = toy_target();
    let report = conformance::run(&target, &Options::default().seeds_from_env());
    println!("{report}");
    report.assert_passed();
    // Every request the mock saw carried the token (the gate answers 401 otherwise, and no
    // case expects that).
    assert!(report.cases.iter().all(|c| c.outcome.is_ok()));
}

#[test]
fn reads_carry_the_configured_token_and_nothing_is_sent_without_one() {
    let target = toy_target();
    target.put("a.bin", &pattern(0, 1000)).unwrap();
    let client = target.builder().build().unwrap();
    let object = client.locate(&target.address("a.bin")).unwrap();
    assert_eq!(client.read(&object, 10, 20).unwrap(), pattern(10, 20));
    let log = target.server().take_requests();
    assert_eq!(log.len(), 1);
    assert_eq!(log[0].byte_range, Some((10, 29)));
    assert_eq!(
        log[0].header("authorization"),
        Some(format!("Bearer {TOKEN}").as_str())
    );

    // No token configured: the lookup fails, the read gets `Credentials`, nothing is sent.
    let client = isolated().build().unwrap();
    let object = client.locate(&target.address("a.bin")).unwrap();
    let error = client.read(&object, 0, 10).unwrap_err();
    assert_eq!(error.status(), Status::Credentials, "{error}");
    assert_eq!(target.server().request_count(), 0);
}

#[test]
fn a_path_rule_gives_a_prefix_its_own_token_and_scope() {
    let target = toy_target();
    target.put("open/a.bin", &pattern(0, 100)).unwrap();
    target.put("locked/a.bin", &pattern(0, 100)).unwrap();
    let prefix = format!("toy://{}/locked", target.server().addr());
    let client = target
        .builder()
        .path_set(&prefix, "toy.token", "another-token")
        .build()
        .unwrap();
    let open = client.locate(&target.address("open/a.bin")).unwrap();
    let locked = client.locate(&target.address("locked/a.bin")).unwrap();
    assert!(client.read(&open, 0, 10).is_ok());
    let error = client.read(&locked, 0, 10).unwrap_err();
    assert_eq!(error.http_status(), Some(401), "{error}");
    let log = target.server().take_requests();
    let tokens: Vec<_> = log.iter().map(|r| r.header("authorization")).collect();
    assert_eq!(
        tokens,
        [
            Some(format!("Bearer {TOKEN}").as_str()),
            Some("Bearer another-token")
        ]
    );
    // Two credential scopes, one lookup each.
    assert_eq!(client.credential_stats().lookups, 2);
}

#[test]
fn an_application_callback_for_the_toy_family_replaces_the_configured_token() {
    let target = toy_target();
    target.put("a.bin", &pattern(0, 100)).unwrap();
    target.put("b.bin", &pattern(0, 100)).unwrap();
    let prefix = format!("toy://{}", target.server().addr());
    let client = isolated()
        .set("toy.token", "a-stale-token")
        .credential_callback(karu_provider_example::FAMILY, move |_: &CanonicalPath| {
            let credential = karu_provider_example::credential(TOKEN);
            Ok(CallbackCredential::for_prefix(credential, prefix.clone()))
        })
        .build()
        .unwrap();
    for name in ["a.bin", "b.bin"] {
        let object = client.locate(&target.address(name)).unwrap();
        assert_eq!(client.read(&object, 0, 10).unwrap(), pattern(0, 10));
    }
    let log = target.server().take_requests();
    assert!(
        log.iter()
            .all(|r| r.header("authorization") == Some(format!("Bearer {TOKEN}").as_str())),
        "{log:?}"
    );
    // One call, cached under its prefix for the second object.
    let stats = client.credential_stats();
    assert_eq!((stats.callback_calls, stats.lookups), (1, 0));

    // A callback for a family no provider of the client declares is refused at build.
    let error = isolated()
        .credential_callback("tyo", |_: &CanonicalPath| {
            Err(karu::Error::new(Status::Credentials, "never called"))
        })
        .build()
        .unwrap_err();
    assert_eq!(error.status(), Status::InvalidArgument);
    assert!(error.message().contains("\"tyo\""), "{error}");
}

#[test]
fn registration_declares_the_scheme_family_and_section() {
    let client = isolated().build().unwrap();
    let registry = client.registry();
    assert!(registry.patterns().contains(&"toy".to_string()));
    assert!(registry.credential_families().contains(&"toy"));
    assert!(registry.config_sections().iter().any(|s| s.name() == "toy"));
    // The section is checked when the client is built, and its token is never quoted.
    let error = isolated().set("toy.tokn", "x").build().unwrap_err();
    assert_eq!(error.status(), Status::InvalidArgument);
    assert!(
        error.message().contains("did you mean \"token\""),
        "{error}"
    );
    let error = isolated().set("toy.token", 42).build().unwrap_err();
    assert!(!error.message().contains("42"), "{error}");
    let object = client.locate("TOY://Host:1/k/x.bin").unwrap();
    assert_eq!(object.canonical().as_str(), "toy://host:1/k/x.bin");
    assert_eq!(object.container(), Some("host:1"));
    assert_eq!(object.key(), "k/x.bin");
    for bad in ["toy://host", "toy:///k", "toy://u:p@h/k", "toy://h/k?x=1"] {
        let error = client.locate(bad).unwrap_err();
        assert_eq!(error.status(), Status::InvalidArgument, "{bad}");
        assert!(!error.message().contains("u:p"), "{error}");
    }
    // Without the provider, the scheme is unknown.
    let plain = Client::builder()
        .user_config_file(None)
        .project_config_file(None)
        .build()
        .unwrap();
    assert_eq!(
        plain.locate("toy://h/k").unwrap_err().status(),
        Status::Unsupported
    );
}
