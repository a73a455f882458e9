//! The conformance suite, fault matrix included, for the S3 provider on the S3 mock (every
//! request's SigV4 signature checked).

use karu_testkit::conformance::{self, Options, S3MockTarget};

#[test]
fn s3_provider_conforms_on_the_mock() {
    let target = S3MockTarget::start();
    let report = conformance::run(&target, &Options::default().seeds_from_env());
    println!("{report}");
    let failures = target.mock_s3().signature_failures();
    assert!(failures.is_empty(), "signature failures: {failures:?}");
    report.assert_passed();
}
