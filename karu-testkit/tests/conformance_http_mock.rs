//! The conformance suite, fault matrix included, for the plain HTTP provider on the mock.

use karu_testkit::conformance::{self, HttpMockTarget, Options};

#[test]
fn http_provider_conforms_on_the_mock() {
    let target = HttpMockTarget::start();
    let report = conformance::run(&target, &Options::default());
    println!("{report}");
    report.assert_passed();
}
