//! Address resolution of every provider: local paths and `file:` URIs, `http(s)://` URLs,
//! `s3://` addresses and AWS S3 URLs, `hf://` addresses and Hub URLs, `source://` addresses
//! and data proxy URLs, `gs://` addresses and GCS URLs, through one registry as a client builds
//! it.
//!
//! Input: any bytes, as text, an address. Invariants:
//!
//! - resolution never panics, and fails only with `InvalidArgument` or `Unsupported`;
//! - the canonical path is stable: resolving it gives the same backend, canonical path,
//!   container, key and target;
//! - a secret in the address (a query string, user information) never reaches an error
//!   message or the `Display`/`Debug` of a locator: each input is also resolved with a marked
//!   query appended and, for a URL, marked user information inserted.
use std::sync::{Arc, OnceLock};

use karu_engine::{Locator, Registry, Status};

const MARK: &str = "KARUFUZZSECRET";

fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        let mut registry = Registry::builder();
        karu_providers::register_all(&mut registry);
        // Relative paths resolve against a fixed base, not the fuzzer's directory.
        registry
            .provider(Arc::new(karu_provider_local::LocalBackend::with_base(
                "/fuzz/base",
            )))
            .scheme(karu_provider_local::SCHEMES[0]);
        registry
            .build()
            .unwrap_or_else(|e| panic!("Karu's providers register: {e}"))
    })
}

/// Check one input (any bytes); panics on a broken invariant.
pub fn run(data: &[u8]) {
    let Ok(address) = std::str::from_utf8(data) else {
        return;
    };
    if address.contains("KARUFUZZ") {
        return;
    }
    if let Some(locator) = resolve(address, false) {
        check_stable(address, &locator);
    }
    resolve(&format!("{address}?X-Amz-Signature={MARK}"), true);
    if let Some((scheme, rest)) = address.split_once("://") {
        for decorated in [
            format!("{scheme}://user:{MARK}@{rest}"),
            format!("{scheme}://{MARK}:pw@{rest}"),
        ] {
            // Only user information is a secret: `user:pw@` may also be part of a path, and an
            // address is a URL only if it starts with a scheme (`url` would also accept one
            // after leading spaces or control characters, which Karu reads as a path).
            let secret = karu_engine::scheme_of(&decorated).is_some()
                && url::Url::parse(&decorated)
                    .is_ok_and(|u| u.username() == MARK || u.password() == Some(MARK));
            resolve(&decorated, secret);
        }
    }
}

/// Resolve, checking that errors have an expected status and, if `secret`, that the marked
/// secret does not leak.
fn resolve(address: &str, secret: bool) -> Option<Locator> {
    match registry().resolve(address) {
        Ok(locator) => {
            for shown in [format!("{locator}"), format!("{locator:?}")] {
                assert!(
                    !(secret && shown.contains(MARK)),
                    "{address:?} shows {shown:?}"
                );
            }
            assert!(!locator.canonical().as_str().is_empty(), "{address:?}");
            Some(locator)
        }
        Err(e) => {
            assert!(
                matches!(e.status(), Status::InvalidArgument | Status::Unsupported),
                "{address:?}: {e}"
            );
            for shown in [e.to_string(), format!("{e:?}")] {
                assert!(
                    !(secret && shown.contains(MARK)),
                    "{address:?} fails with {shown:?}"
                );
            }
            None
        }
    }
}

fn check_stable(address: &str, locator: &Locator) {
    let canonical = locator.canonical().as_str();
    let again = registry()
        .resolve(canonical)
        .unwrap_or_else(|e| panic!("{address:?} -> {canonical:?} does not resolve: {e}"));
    assert_eq!(
        (
            again.backend().name(),
            again.canonical(),
            again.container(),
            again.key(),
            again.target()
        ),
        (
            locator.backend().name(),
            locator.canonical(),
            locator.container(),
            locator.key(),
            locator.target()
        ),
        "{address:?} -> {canonical:?}"
    );
}
