//! `read_ends` through a backend that declares it ignores suffix ranges (as Azure does): the
//! tail follows the head, pinned with `If-Match` to the head's ETag. The backend is a
//! third-party one, registered on the client builder.

#[path = "support/http.rs"]
mod http_support;

use std::sync::Arc;

use http_support::{build, isolated, with_backend};
use karu::Status;
use karu_engine::sdk::{
    Backend, CanonicalPath, Capabilities, Error, PrepareContext, PreparedRequest, Resolved,
};
use karu_testkit::{Fault, FaultRule, MockServer, pattern};

/// Plain HTTP under the `nosuffix://` scheme, without suffix ranges.
#[derive(Debug)]
struct NoSuffix;

impl Backend for NoSuffix {
    fn name(&self) -> &str {
        "nosuffix"
    }

    fn resolve(&self, address: &str) -> Result<Resolved, Error> {
        let url = address.replacen("nosuffix://", "http://", 1);
        Ok(Resolved::remote(
            CanonicalPath::new(url),
            None,
            String::new(),
        ))
    }

    fn prepare(&self, ctx: &PrepareContext<'_>) -> Result<PreparedRequest, Error> {
        PreparedRequest::get(ctx.locator.canonical().as_str(), ctx)
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::without_suffix_ranges()
    }
}

const SIZE: u64 = 100_000;

fn setup() -> (MockServer, karu::Client, karu::Locator) {
    let server = MockServer::start();
    server.insert_virtual("/obj.bin", SIZE);
    let client = build(with_backend(
        isolated(),
        "nosuffix",
        None,
        Arc::new(NoSuffix),
    ));
    let address = server.url("/obj.bin").replacen("http://", "nosuffix://", 1);
    let object = client.locate(&address).unwrap();
    (server, client, object)
}

#[test]
fn the_tail_follows_the_head_pinned_to_its_etag() {
    let (server, client, object) = setup();
    let ends = client.read_ends(&object, 1000, 2000).unwrap();
    assert_eq!(ends.size, SIZE);
    assert_eq!(ends.head, pattern(0, 1000));
    assert_eq!(ends.tail, pattern(SIZE - 2000, 2000));
    let log = server.requests();
    assert_eq!(log.len(), 2, "{log:?}");
    assert_eq!(log[0].byte_range, Some((0, 999)));
    assert_eq!(log[0].header("if-match"), None);
    assert_eq!(log[1].byte_range, Some((SIZE - 2000, SIZE - 1)));
    let etag = ends.etag.expect("the mock sends a strong ETag");
    assert_eq!(log[1].header("if-match"), Some(etag.as_str()));
}

#[test]
fn an_object_that_changes_between_head_and_tail_fails_the_call() {
    let (server, client, object) = setup();
    server.add_fault(FaultRule::new(Fault::ChangeEtag).skip(1).times(1));
    let error = client.read_ends(&object, 1000, 2000).unwrap_err();
    assert_eq!(error.status(), Status::PreconditionFailed, "{error}");
    let log = server.requests();
    assert_eq!(log.len(), 2, "{log:?}");
    assert_eq!(log[1].status, 412);
}
