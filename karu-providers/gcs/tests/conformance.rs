//! The conformance suite against the GCS mock: every case, and the fault matrix (single,
//! merged, 1,000-read batch), each request's bearer token checked by the mock.

use karu_testkit::conformance::{self, GcsMockTarget, Options};

#[test]
fn gcs_conforms_on_its_mock() {
    let target = GcsMockTarget::start();
    let report = conformance::run(&target, &Options::default().seeds_from_env());
    println!("{report}");
    report.assert_passed();
    assert_eq!(target.mock_gcs().rejections(), vec![]);
    assert!(
        target
            .mock_gcs()
            .authenticated()
            .iter()
            .all(|a| a.identity == "conformance")
    );
}
