//! The Azure provider against a real Azurite 3.35.0 (installed by `cargo xtask test`): the
//! conformance suite with Shared Key and with an account SAS, and read_ends without suffix
//! ranges. These fail, never skip, when Azurite is missing.
//!
//! Azurite answers a range at or past the end of a blob with `206` and
//! `Content-Range: bytes SIZE-(SIZE-1)/SIZE` (`bytes 0--1/0` for an empty blob; Azure answers
//! `416`); Karu reads it as the end of an object of that size
//! ([`azurites_answers_at_the_end_of_a_blob_are_the_end_of_the_object`]), so the whole suite
//! runs here.

use std::time::{Duration, SystemTime};

use karu::{Client, Evidence, Read, Status};
use karu_testkit::AzureMock;
use karu_testkit::azure::Sas;
use karu_testkit::azurite::{self, Azurite};
use karu_testkit::conformance::{self, AzuriteTarget, Options, Target};
use karu_testkit::pattern;

/// The whole suite on Azurite (its `206` with `bytes 0--1/0` for a range of an empty blob is
/// read as the end of an empty object).
fn options() -> Options {
    Options::default().seeds_from_env()
}

fn start(sas: bool) -> AzuriteTarget {
    assert!(
        Azurite::available(),
        "Azurite is not installed: {}",
        azurite::install_hint()
    );
    AzuriteTarget::start(sas).unwrap_or_else(|e| panic!("cannot start Azurite: {e}"))
}

#[test]
fn the_azure_provider_conforms_on_azurite_with_shared_key() {
    let target = start(false);
    let report = conformance::run(&target, &options());
    println!("{report}");
    report.assert_passed();
}

#[test]
fn the_azure_provider_conforms_on_azurite_with_a_sas() {
    let target = start(true);
    let report = conformance::run(&target, &options());
    println!("{report}");
    report.assert_passed();
}

/// The status of reading 10 bytes of `container/blob` at `endpoint` with `sas`.
fn read_with_sas(endpoint: &str, sas: &str, container: &str, blob: &str) -> Result<(), Status> {
    let client = Client::builder()
        .user_config_file(None)
        .project_config_file(None)
        .environment(Vec::<(String, String)>::new())
        .set("azure.endpoint", endpoint)
        .set("azure.sas_token", sas)
        .build()
        .unwrap();
    let object = client.locate(&format!("az://{container}/{blob}")).unwrap();
    match client.read(&object, 0, 10) {
        Ok(bytes) => {
            assert_eq!(bytes, pattern(0, 10));
            Ok(())
        }
        Err(error) => Err(error.status()),
    }
}

/// The testkit's SAS tokens (what the mock verifies) are Azure's: Azurite, an independent
/// implementation, accepts and refuses each token exactly as the mock does, for the same
/// account and key.
#[test]
fn azurite_and_the_mock_agree_on_every_sas_token() {
    let target = start(false);
    let azurite = target.azurite();
    azurite.create_container("other").unwrap();
    let mock = AzureMock::start();
    let blob = "dir/a b+ü.bin";
    for container in ["conformance", "other"] {
        azurite.put(container, blob, &pattern(0, 100)).unwrap();
        mock.insert(container, blob, pattern(0, 100));
    }
    let later = SystemTime::now() + Duration::from_secs(3600);
    let earlier = SystemTime::now() - Duration::from_secs(60);
    let cases: [(Sas, &str, Result<(), Status>); 9] = [
        (Sas::container("conformance", later), "conformance", Ok(())),
        (Sas::blob("conformance", blob, later), "conformance", Ok(())),
        (Sas::account(later), "other", Ok(())),
        (
            Sas::container("conformance", later).start(earlier),
            "conformance",
            Ok(()),
        ),
        (
            Sas::container("conformance", later),
            "other",
            Err(Status::PermissionDenied),
        ),
        (
            Sas::blob("conformance", "dir/other.bin", later),
            "conformance",
            Err(Status::PermissionDenied),
        ),
        (
            Sas::container("conformance", earlier),
            "conformance",
            Err(Status::PermissionDenied),
        ),
        (
            Sas::container("conformance", later).permissions("wl"),
            "conformance",
            Err(Status::PermissionDenied),
        ),
        (
            Sas::account(later).account_scope("b", "sc"),
            "conformance",
            Err(Status::PermissionDenied),
        ),
    ];
    for (sas, container, expected) in cases {
        let token = azurite.sas(&sas);
        assert_eq!(
            read_with_sas(&azurite.endpoint(), &token, container, blob),
            expected,
            "Azurite: {sas:?} on {container}"
        );
        assert_eq!(
            read_with_sas(&mock.endpoint(), &mock.sas(&sas), container, blob),
            expected,
            "mock: {sas:?} on {container}"
        );
        assert_eq!(token, mock.sas(&sas), "one account, one key, one token");
    }
}

#[test]
fn ranged_reads_and_read_ends_on_azurite() {
    let target = start(false);
    target.put("dir/a b+ü.bin", &pattern(0, 100_000)).unwrap();
    let client = target.builder().build().unwrap();
    let object = client.locate(&target.address("dir/a b+ü.bin")).unwrap();
    assert_eq!(
        client.read(&object, 1000, 5000).unwrap(),
        pattern(1000, 5000)
    );
    assert_eq!(client.stat(&object).unwrap().size, Some(100_000));
    let ends = client.read_ends(&object, 100, 300).unwrap();
    assert_eq!(ends.head, pattern(0, 100));
    assert_eq!(ends.tail, pattern(99_700, 300));
    assert_eq!(ends.size, 100_000);
    // A wrong key is refused by Azurite's own Shared Key check.
    let wrong = target
        .builder()
        .set(
            "azure.account_key",
            "AAAAbm90IHRoZSBrZXkgb2YgdGhpcyBhY2NvdW50AAAA",
        )
        .build()
        .unwrap();
    let object = wrong.locate(&target.address("dir/a b+ü.bin")).unwrap();
    let error = wrong.read(&object, 0, 10).unwrap_err();
    assert_eq!(error.http_status(), Some(403), "{error}");
}

#[test]
fn azurites_answers_at_the_end_of_a_blob_are_the_end_of_the_object() {
    // Azurite answers a range at or past the end of a blob with `206` and
    // `bytes SIZE-(SIZE-1)/SIZE` (`bytes 0--1/0` for an empty one), where Azure answers 416.
    // They were protocol errors; they state the end and the size, and are read as such.
    let target = start(false);
    target.put("empty.bin", &[]).unwrap();
    target.put("seven.bin", &pattern(0, 7)).unwrap();
    let client = target.builder().build().unwrap();
    let empty = client.locate(&target.address("empty.bin")).unwrap();
    let seven = client.locate(&target.address("seven.bin")).unwrap();
    assert_eq!(client.stat(&empty).unwrap().size, Some(0));
    let ends = client.read_ends(&empty, 10, 10).unwrap();
    assert_eq!((ends.size, ends.head.len(), ends.tail.len()), (0, 0, 0));
    let done = client
        .submit([
            Read::new(&empty, 0, 1),
            Read::new(&seven, 7, 10),
            Read::new(&seven, 26, 10),
            Read::new(&seven, 5, 10),
        ])
        .wait();
    let expected = [(0, 1, 0, 0), (7, 10, 0, 7), (26, 10, 0, 7), (5, 10, 2, 7)];
    for (c, (offset, requested, received, size)) in done.iter().zip(expected) {
        assert_eq!(c.status(), Status::RangeNotSatisfiable, "{c:?}");
        assert_eq!(c.bytes(), &pattern(offset, received as usize)[..], "{c:?}");
        assert_eq!(
            c.error().unwrap().evidence(),
            Some(&Evidence::EndOfObject {
                offset,
                requested,
                received,
                size: Some(size),
            }),
            "{c:?}"
        );
    }
}
