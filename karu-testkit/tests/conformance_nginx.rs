//! The conformance suite for the plain HTTP provider against a real nginx, over HTTP/1.1 and
//! over HTTPS with HTTP/2.

use karu_testkit::conformance::{self, NginxTarget, Options};
use karu_testkit::nginx::Nginx;

#[test]
fn http_provider_conforms_on_nginx() {
    assert!(
        Nginx::available(),
        "nginx is not installed: run `cargo xtask test`, which installs it"
    );
    let target = NginxTarget::start().expect("nginx starts");
    let report = conformance::run(&target, &Options::default().seeds_from_env());
    println!("{report}");
    report.assert_passed();
}

/// The clients speak only HTTP/2 (`http.version = "http2"`), which fails every read on a server
/// that does not: passing is the proof that nginx's HTTP/2 carried them.
#[test]
fn http_provider_conforms_on_nginx_over_https_and_http2() {
    assert!(
        Nginx::available(),
        "nginx is not installed: run `cargo xtask test`, which installs it"
    );
    let target = NginxTarget::start_https_http2().expect("nginx starts with TLS");
    let report = conformance::run(&target, &Options::default().seeds_from_env());
    println!("{report}");
    report.assert_passed();
}
