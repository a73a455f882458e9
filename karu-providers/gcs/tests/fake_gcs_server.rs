//! The GCS provider against a real fake-gcs-server (installed by `cargo xtask test`): exact
//! ranged reads, stat, read_ends, windows and missing objects through the conformance suite,
//! with the server started as its documentation shows and reached through
//! `STORAGE_EMULATOR_HOST` as Google's clients reach it (the JSON API's media downloads), and
//! with `-public-host` set so that it serves the XML API too (reached as `gcs.endpoint`).
//! fake-gcs-server ignores `If-Match`: the suite's if-match case records that as the server's
//! limit, and Karu's own check of the answer's ETag still holds.

use karu::{Client, Status};
use karu_testkit::conformance::{self, GcsTarget, Options};
use karu_testkit::fake_gcs::{self, FakeGcs};

#[test]
fn gcs_conforms_on_fake_gcs_server() {
    assert!(
        FakeGcs::available(),
        "fake-gcs-server is not installed: {}",
        fake_gcs::install_hint()
    );
    let target = GcsTarget::fake_gcs_server().unwrap();
    let report = conformance::run(&target, &Options::default().seeds_from_env());
    println!("{report}");
    report.assert_passed();
}

#[test]
fn gcs_conforms_on_fake_gcs_server_s_xml_api() {
    let target = GcsTarget::fake_gcs_server_xml().unwrap();
    let report = conformance::run(&target, &Options::default().seeds_from_env());
    println!("{report}");
    report.assert_passed();
}

#[test]
fn ranged_reads_through_the_emulator_host() {
    let server = FakeGcs::start().expect("fake-gcs-server");
    server.create_bucket("bkt").unwrap();
    let bytes: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let name = "dir/a b+c%d/ü//x.bin";
    server.upload("bkt", name, &bytes).unwrap();
    let host = server.endpoint().trim_start_matches("http://").to_string();
    let client = Client::builder()
        .user_config_file(None)
        .project_config_file(None)
        .environment([("STORAGE_EMULATOR_HOST", host)])
        .build()
        .unwrap();
    let object = client.locate(&format!("gs://bkt/{name}")).unwrap();
    assert_eq!(client.stat(&object).unwrap().size, Some(100_000));
    assert_eq!(client.read(&object, 0, 10).unwrap(), &bytes[..10]);
    assert_eq!(
        client.read(&object, 54_321, 4096).unwrap(),
        &bytes[54_321..54_321 + 4096]
    );
    // A read past the end delivers what exists and marks the rest.
    let tail = client.read(&object, 99_990, 100);
    assert!(
        matches!(&tail, Err(e) if e.status() == Status::RangeNotSatisfiable)
            || tail.as_deref() == Ok(&bytes[99_990..]),
        "{tail:?}"
    );
    let missing = client.locate("gs://bkt/not-there").unwrap();
    assert_eq!(
        client.read(&missing, 0, 10).unwrap_err().status(),
        Status::NotFound
    );
    // Started without `-public-host`, the server takes an XML API path's host for a bucket:
    // the same object is not found there (why emulators are read through the JSON API).
    let xml = Client::builder()
        .user_config_file(None)
        .project_config_file(None)
        .environment([("STORAGE_EMULATOR_HOST", server.endpoint())])
        .set("gcs.api", "xml")
        .build()
        .unwrap();
    let object = xml.locate(&format!("gs://bkt/{name}")).unwrap();
    assert_eq!(
        xml.read(&object, 0, 10).unwrap_err().status(),
        Status::NotFound
    );
}
