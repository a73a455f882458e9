//! The core server's hooks for cloud mocks: a gate and a route see the request body and can
//! answer `POST` and `PUT`; a route answers after the status faults; a gate can name the
//! stored object a request reads; bodies over the limit get 413.

mod support;

use std::sync::Arc;

use karu_testkit::{
    Fault, FaultRule, Gate, GateResponse, MAX_REQUEST_BODY, MockServer, RequestHead, Route, pattern,
};
use support::Client;

#[derive(Debug)]
struct Echo;

impl Route for Echo {
    fn respond(&self, request: &RequestHead) -> Option<GateResponse> {
        (request.path == "/echo").then(|| {
            GateResponse::new(200, request.body.clone()).header("x-method", request.method.as_str())
        })
    }
}

/// Refuses bodies containing "forbidden"; reads `/alias` from `/real`.
#[derive(Debug)]
struct BodyGate;

impl Gate for BodyGate {
    fn check(&self, request: &RequestHead) -> Option<GateResponse> {
        request
            .body
            .windows(9)
            .any(|w| w == b"forbidden")
            .then(|| GateResponse::new(403, "no"))
    }

    fn object_path(&self, request: &RequestHead) -> Option<String> {
        (request.path == "/alias").then(|| "/real".to_owned())
    }
}

#[test]
fn a_route_answers_posts_and_puts_with_their_bodies() {
    let server = MockServer::start();
    server.set_route(Some(Arc::new(Echo)));
    let mut client = Client::connect(server.addr());
    for method in ["POST", "PUT"] {
        client
            .send_with_body(method, "/echo", &[], b"hello body")
            .unwrap();
        let r = client.read_response(false).unwrap();
        assert_eq!((r.status, r.body.as_slice()), (200, &b"hello body"[..]));
        assert_eq!(r.header("x-method"), Some(method));
    }
    // Requests it does not answer go on: 405 for a POST elsewhere, objects for GET.
    client.send_with_body("POST", "/other", &[], b"x").unwrap();
    assert_eq!(client.read_response(false).unwrap().status, 405);
    server.insert("/obj", pattern(0, 10));
    assert_eq!(client.get("/obj").body, pattern(0, 10));
    // Status faults answer before the route.
    server.add_fault(
        FaultRule::new(Fault::Status {
            code: 503,
            retry_after: None,
        })
        .path("/echo")
        .times(1),
    );
    client.send_with_body("POST", "/echo", &[], b"x").unwrap();
    assert_eq!(client.read_response(false).unwrap().status, 503);
    server.set_route(None);
    client.send_with_body("POST", "/echo", &[], b"x").unwrap();
    assert_eq!(client.read_response(false).unwrap().status, 405);
}

#[test]
fn a_gate_sees_the_body_and_can_name_the_object() {
    let server = MockServer::start();
    server.set_gate(Some(Arc::new(BodyGate)));
    server.insert("/real", pattern(0, 100));
    let mut client = Client::connect(server.addr());
    client
        .send_with_body("POST", "/x", &[], b"this is forbidden")
        .unwrap();
    assert_eq!(client.read_response(false).unwrap().status, 403);
    let r = client.get_range("/alias", "bytes=10-19");
    assert_eq!(
        (r.status, r.body.as_slice()),
        (206, pattern(10, 10).as_slice())
    );
    assert_eq!(server.requests().last().unwrap().path, "/alias");
    // Without a gate, /alias is just missing; error documents carry a request id.
    server.set_gate(None);
    let r = client.get("/alias");
    assert_eq!(r.status, 404);
    let id = support::xml::text(&r.body, "Error/RequestId").unwrap();
    assert_eq!(r.header("x-amz-request-id"), Some(id.as_str()));
}

#[test]
fn bodies_over_the_limit_get_413() {
    let server = MockServer::start();
    server.set_route(Some(Arc::new(Echo)));
    let mut client = Client::connect(server.addr());
    let exact = vec![b'a'; MAX_REQUEST_BODY];
    client.send_with_body("POST", "/echo", &[], &exact).unwrap();
    let r = client.read_response(false).unwrap();
    assert_eq!((r.status, r.body.len()), (200, MAX_REQUEST_BODY));
    let mut client = Client::connect(server.addr());
    client
        .send_with_body("POST", "/echo", &[], &vec![b'a'; MAX_REQUEST_BODY + 1])
        .unwrap();
    let r = client.read_response(false).unwrap();
    assert_eq!(r.status, 413);
    assert_eq!(
        support::xml::text(&r.body, "Error/Code").as_deref(),
        Some("EntityTooLarge")
    );
}
