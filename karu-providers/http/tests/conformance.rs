//! The conformance suite, fault matrix and random cases included, for the plain HTTP provider
//! on the mock; and the random cases again over HTTPS with HTTP/2.

use karu_testkit::conformance::{self, HttpMockTarget, Options};

#[test]
fn http_provider_conforms_on_the_mock() {
    let target = HttpMockTarget::start();
    let report = conformance::run(&target, &Options::default().seeds_from_env());
    println!("{report}");
    report.assert_passed();
}

#[test]
fn http_provider_rides_out_random_faults_over_https_and_http2() {
    let target = HttpMockTarget::start_https_http2().expect("the HTTPS mock server starts");
    let options = Options::default()
        .filter("random/")
        .seeds(1_000_001, 200)
        .seeds_from_env();
    let report = conformance::run(&target, &options);
    println!("{report}");
    assert_eq!(report.cases.len(), 1, "{report}");
    report.assert_passed();
}
