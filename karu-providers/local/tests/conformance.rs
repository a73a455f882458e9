//! The conformance suite for the local provider on files in a temporary directory: the basic
//! cases (but the two a file cannot pass: no coalescing, no versions) and the random cases
//! (windows, every kind of destination, batches at once, readers), without a fault plan.

use karu_testkit::conformance::{self, LocalTarget, Options};

#[test]
fn local_provider_conforms_on_files() {
    let target = LocalTarget::start().expect("a temporary directory");
    let report = conformance::run(&target, &Options::default().seeds_from_env());
    println!("{report}");
    report.assert_passed();
    let limits: Vec<_> = report
        .cases
        .iter()
        .filter(|c| c.known_limit.is_some())
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(limits, ["basic/merged", "basic/if_match"], "{report}");
}
