//! The conformance suite against the GCS mock: every case, and the fault matrix (single,
//! merged, 1,000-read batch), each request's bearer token checked by the mock; through the XML
//! API (`gcs.endpoint`) and through the JSON API's media downloads (`STORAGE_EMULATOR_HOST`).

use karu_testkit::conformance::{self, GcsMockTarget, Options};

#[test]
fn gcs_conforms_on_its_mock() {
    conforms(&GcsMockTarget::start(), "/karu-conformance/");
}

#[test]
fn gcs_conforms_on_its_mock_through_the_emulator_host() {
    conforms(
        &GcsMockTarget::start_emulator(),
        "/download/storage/v1/b/karu-conformance/o/",
    );
}

/// The suite passes, every request authenticated with the target's token, every one of them
/// on the API's own paths (`prefix`).
fn conforms(target: &GcsMockTarget, prefix: &str) {
    let report = conformance::run(target, &Options::default().seeds_from_env());
    println!("{report}");
    report.assert_passed();
    assert_eq!(target.mock_gcs().rejections(), vec![]);
    let authenticated = target.mock_gcs().authenticated();
    assert!(authenticated.len() > 1000, "{}", authenticated.len());
    for request in authenticated {
        assert_eq!(request.identity, "conformance");
        assert!(request.path.starts_with(prefix), "{request:?}");
    }
}
