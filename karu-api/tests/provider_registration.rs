//! Third-party providers through `ClientBuilder::provider`: one line adds a provider with its
//! patterns, credential family and configuration section; each client's registry is frozen when
//! it is built; bad registrations, panicking ones and callbacks for families nobody declares
//! are build errors; and the engine sends only requests whose `Range` is the one it asked for.

#[path = "support/http.rs"]
mod http_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use http_support::{build, isolated};
use karu::{CanonicalPath, Read, Status};
use karu_engine::sdk::http::HeaderValue;
use karu_engine::sdk::{
    Backend, CanonicalPath as Canonical, Error, PrepareContext, PreparedRequest, RegistryBuilder,
    Resolved, Section, SectionConfig, SectionKeys,
};
use karu_testkit::{MockServer, pattern};

/// Plain HTTP under `plain://`; optionally asks for one byte more than the engine asked for.
#[derive(Debug, Default)]
struct Plain {
    widen_range: bool,
}

impl Backend for Plain {
    fn name(&self) -> &str {
        "plain"
    }

    fn resolve(&self, address: &str) -> Result<Resolved, Error> {
        let url = address.replacen("plain://", "http://", 1);
        Ok(Resolved::remote(Canonical::new(url), None, String::new()))
    }

    fn prepare(&self, ctx: &PrepareContext<'_>) -> Result<PreparedRequest, Error> {
        let mut request = PreparedRequest::get(ctx.locator.canonical().as_str(), ctx)?;
        if self.widen_range {
            request
                .headers
                .insert("range", HeaderValue::from_static("bytes=0-100"));
        }
        Ok(request)
    }
}

/// The `[plain]` section.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
struct PlainConfig {
    #[allow(dead_code)]
    header: Option<String>,
}

impl SectionConfig for PlainConfig {}
impl SectionKeys for PlainConfig {}

/// The `register` function of a provider crate.
fn register(registry: &mut RegistryBuilder) {
    registry
        .provider(Arc::new(Plain::default()))
        .scheme("plain")
        .credential_family("plainauth")
        .config_section(Section::of::<PlainConfig>("plain"));
}

#[test]
fn one_line_adds_a_provider_with_its_family_and_section() {
    let server = MockServer::start();
    server.insert("/o", pattern(0, 1000));
    let client = build(isolated().provider(register));
    let registry = client.registry();
    assert!(registry.patterns().contains(&"plain".to_string()));
    assert!(registry.credential_families().contains(&"plainauth"));
    let sections: Vec<_> = registry
        .config_sections()
        .iter()
        .map(Section::name)
        .collect();
    assert!(sections.contains(&"plain"), "{sections:?}");
    // The section is checked when a client is built.
    let error = isolated()
        .provider(register)
        .set("plain.headr", "x")
        .build()
        .unwrap_err();
    assert_eq!(error.status(), Status::InvalidArgument);
    assert!(error.message().contains("plain.headr"), "{error}");
    let object = client
        .locate(&server.url("/o").replacen("http://", "plain://", 1))
        .unwrap();
    assert_eq!(object.backend().name(), "plain");
    assert_eq!(client.read(&object, 100, 10).unwrap(), pattern(100, 10));
    assert_eq!(server.requests()[0].byte_range, Some((100, 109)));
}

#[test]
fn a_clients_registry_is_frozen_when_it_is_built() {
    let made = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&made);
    let builder = isolated().provider(move |registry: &mut RegistryBuilder| {
        counted.fetch_add(1, Ordering::SeqCst);
        register(registry);
    });
    let first = build(builder.clone());
    let second = build(builder.clone());
    // Each client ran the registration: backends are the client's own.
    assert_eq!(made.load(Ordering::SeqCst), 2);
    let a = first.locate("plain://h/x").unwrap();
    let b = second.locate("plain://h/x").unwrap();
    assert!(!Arc::ptr_eq(a.backend(), b.backend()));

    // A builder that later gains a provider changes no client already built.
    let later = build(builder.provider(|registry: &mut RegistryBuilder| {
        registry
            .provider(Arc::new(Plain::default()))
            .scheme("other");
    }));
    assert!(later.locate("other://h/x").is_ok());
    let error = first.locate("other://h/x").unwrap_err();
    assert_eq!(error.status(), Status::Unsupported);
}

#[test]
fn invalid_and_panicking_registrations_are_build_errors() {
    let error = isolated()
        .provider(|registry: &mut RegistryBuilder| {
            registry
                .provider(Arc::new(Plain::default()))
                .scheme("no spaces");
        })
        .build()
        .unwrap_err();
    assert_eq!(error.status(), Status::InvalidArgument);
    assert!(error.message().contains("\"no spaces\""), "{error}");

    let error = isolated()
        .provider(|_: &mut RegistryBuilder| panic!("a broken provider crate"))
        .build()
        .unwrap_err();
    assert_eq!(error.status(), Status::Internal);
}

#[test]
fn a_callback_needs_a_provider_of_its_family() {
    let callback = |_: &CanonicalPath| Err(karu::Error::new(Status::Credentials, "unused"));
    let error = isolated()
        .credential_callback("awz", callback)
        .build()
        .unwrap_err();
    assert_eq!(error.status(), Status::InvalidArgument);
    assert!(error.message().contains("\"awz\""), "{error}");
    // A family some provider declares is fine: Karu's S3 (`aws`), or a third party's.
    assert!(
        isolated()
            .credential_callback("aws", callback)
            .build()
            .is_ok()
    );
    let error = isolated()
        .credential_callback("plainauth", callback)
        .build()
        .unwrap_err();
    assert_eq!(error.status(), Status::InvalidArgument);
    assert!(
        isolated()
            .provider(register)
            .credential_callback("plainauth", callback)
            .build()
            .is_ok()
    );
}

#[test]
fn a_request_whose_range_header_differs_from_the_asked_range_is_never_sent() {
    let server = MockServer::start();
    server.insert("/o", pattern(0, 1000));
    let client = build(isolated().provider(|registry: &mut RegistryBuilder| {
        registry
            .provider(Arc::new(Plain { widen_range: true }))
            .scheme("plain");
    }));
    let object = client
        .locate(&server.url("/o").replacen("http://", "plain://", 1))
        .unwrap();
    let batch = client.submit([Read::new(&object, 10, 5)]);
    let done = batch.wait();
    assert_eq!(done[0].status(), Status::Internal, "{:?}", done[0]);
    assert_eq!(done[0].bytes_received(), 0);
    assert_eq!(server.request_count(), 0, "nothing reached the server");
}
