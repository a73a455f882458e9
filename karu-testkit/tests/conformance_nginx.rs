//! The conformance suite for the plain HTTP provider against a real nginx, over HTTP/1.1 and
//! over HTTPS with HTTP/2.

use karu_testkit::conformance::{self, NginxTarget, Options};
use karu_testkit::nginx::Nginx;

/// The whole suite on nginx started by `start`.
fn conforms(start: fn() -> std::io::Result<NginxTarget>) {
    assert!(
        Nginx::available(),
        "nginx is not installed: run `cargo xtask test`, which installs it"
    );
    let target = start().expect("nginx starts");
    let report = conformance::run(&target, &Options::default().seeds_from_env());
    println!("{report}");
    report.assert_passed();
}

#[test]
fn http_provider_conforms_on_nginx() {
    conforms(NginxTarget::start);
}

/// The clients speak only HTTP/2 (`http.version = "http2"`), which fails every read on a server
/// that does not: passing is the proof that nginx's HTTP/2 carried them.
#[test]
fn http_provider_conforms_on_nginx_over_https_and_http2() {
    conforms(NginxTarget::start_https_http2);
}
