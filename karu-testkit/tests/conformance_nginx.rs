//! The conformance suite's basic cases for the plain HTTP provider against a real nginx.

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
